//! Links the image with `linker/qemu-virt.ld`, by absolute path so the build
//! works from any working directory.

use std::path::PathBuf;

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let script = manifest_dir.join("../../linker/qemu-virt.ld");
    let script = script.canonicalize().unwrap_or_else(|error| {
        panic!("linker script {} not found: {error}", script.display());
    });
    println!("cargo:rustc-link-arg-bins=-T{}", script.display());
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-changed=build.rs");
}
