#!/usr/bin/env bash
# Runs the workspace test suite for aarch64-unknown-linux-gnu under qemu-user.
# The linker (aarch64-linux-gnu-gcc) and runner (qemu-aarch64-static with the
# /usr/aarch64-linux-gnu sysroot) come from the repository's
# .cargo/config.toml. This script installs nothing: the toolchain, the Rust
# target and QEMU must already be there (the project's setup script does it).
#
# Usage: qemu/test-aarch64.sh [cargo test args...]   (from any directory)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=aarch64-unknown-linux-gnu

missing=0
for tool in cargo aarch64-linux-gnu-gcc qemu-aarch64-static; do
    if ! command -v "$tool" >/dev/null; then
        echo "test-aarch64.sh: '$tool' not found" >&2
        missing=1
    fi
done
if [[ ! -d /usr/aarch64-linux-gnu ]]; then
    echo "test-aarch64.sh: sysroot /usr/aarch64-linux-gnu not found (Debian: libc6-dev-arm64-cross)" >&2
    missing=1
fi
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$target"; then
    echo "test-aarch64.sh: Rust target $target not installed (rustup target add $target)" >&2
    missing=1
fi
if [[ $missing -ne 0 ]]; then
    echo "test-aarch64.sh: install the missing pieces first (the project's setup script does)" >&2
    exit 2
fi

# cd so that the repository's .cargo/config.toml (linker, runner) applies.
cd "$repo"
exec cargo test --workspace --exclude smarm-benches --target "$target" "$@"
