#!/usr/bin/env bash
# Builds the smarm bare-metal image (qemu/image) for aarch64-unknown-none and
# boots it on QEMU's AArch64 `virt` machine. The UART goes to stdout; the
# script's exit status is the image's (semihosting SYS_EXIT): 0 only if every
# scenario passed. A hung image is killed after the timeout and fails.
#
# Usage: qemu/run-bare.sh [--release]     (from any directory)
# Env:   SMARM_BARE_TIMEOUT  seconds before the run is killed (default 120)
#        CARGO_TARGET_DIR    respected as usual (default: qemu/image/target)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image_dir="$here/image"
timeout_seconds="${SMARM_BARE_TIMEOUT:-120}"

profile_args=()
for argument in "$@"; do
    case "$argument" in
        --release) profile_args=(--release) ;;
        -h | --help)
            sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "run-bare.sh: unknown argument '$argument' (only --release is accepted)" >&2
            exit 2
            ;;
    esac
done

for tool in cargo qemu-system-aarch64 timeout; do
    if ! command -v "$tool" >/dev/null; then
        echo "run-bare.sh: '$tool' not found; install it first (the project's setup script does)" >&2
        exit 2
    fi
done

# Build from inside the image crate so its .cargo/config.toml applies; the
# target is also passed explicitly. Cargo's JSON messages name the ELF, so
# the script does not guess the target directory.
cd "$image_dir"
build_log="$(mktemp)"
trap 'rm -f "$build_log"' EXIT
if ! cargo build --manifest-path "$image_dir/Cargo.toml" --target aarch64-unknown-none \
    ${profile_args[@]+"${profile_args[@]}"} --message-format=json-render-diagnostics >"$build_log"; then
    echo "run-bare.sh: building the bare image failed" >&2
    exit 1
fi
elf="$(grep -o '"executable":"[^"]*"' "$build_log" | tail -n 1 | sed 's/^"executable":"//; s/"$//')"
if [[ -z "$elf" || ! -f "$elf" ]]; then
    echo "run-bare.sh: cargo did not report the image's executable" >&2
    exit 1
fi

echo "run-bare.sh: booting $elf (timeout ${timeout_seconds}s)" >&2
# -m matches the RAM length in linker/qemu-virt.ld. -smp 4 matches the
# image's core count (board::CORES, the linker script's secondary stacks):
# its last scenario starts cores 1-3 with PSCI. </dev/null: the image
# reads no input, and QEMU must not wait on a terminal under CI.
status=0
timeout "$timeout_seconds" qemu-system-aarch64 \
    -M virt -cpu cortex-a53 -smp 4 -m 128M \
    -nographic -semihosting \
    -kernel "$elf" </dev/null || status=$?

if [[ $status -eq 124 ]]; then
    echo "run-bare.sh: TIMEOUT: the image did not exit within ${timeout_seconds}s (hung, or an exception loop)" >&2
elif [[ $status -ne 0 ]]; then
    echo "run-bare.sh: FAILED: the image exited with status $status" >&2
else
    echo "run-bare.sh: the image exited with status 0" >&2
fi
exit "$status"
