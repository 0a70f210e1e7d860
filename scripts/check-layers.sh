#!/usr/bin/env bash
# Checks the one-way import rule between the layers of smarm-core:
#
#   kernel  imports nothing from sync, otp or actor
#   sync    imports only kernel
#   otp     imports kernel and sync
#   actor   imports kernel, sync and otp
#   inside kernel: a leaf file imports no scheduler file (runtime, death, handle, stackless, worker,
#   process, join, slab, single, wait) beyond the edges already listed below
#
# Every path that names a layer is checked — `use crate::otp::…`,
# `crate::sync::channel::channel()` in an expression, and intra-doc links —
# so a reference that points up a layer fails the run with its file and line.
# Test modules are held to the same rule. Exit status: 0 when the rule holds.
#
# Usage: scripts/check-layers.sh            (from any directory)
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../core/src" && pwd)"

# layer → the layers it may not name
declare -A forbidden=(
    [kernel]="sync otp actor"
    [sync]="otp actor"
    [otp]="actor"
    [actor]=""
)

status=0
for layer in kernel sync otp actor; do
    [ -d "$src/$layer" ] || continue
    for above in ${forbidden[$layer]}; do
        # `crate::above` as a path segment, and `super::` chains that climb
        # out of the layer into it (e.g. `super::super::otp`).
        if hits=$(grep -rnE "crate::${above}\b|(super::)+${above}\b" "$src/$layer" --include='*.rs'); then
            while IFS= read -r hit; do
                echo "layer rule: core/src/$layer may not name $above: ${hit#"$src/"}" >&2
            done <<<"$hits"
            status=1
        fi
    done
done

# Every layer folder must be declared, and no module may sit beside them
# at the crate root except lib.rs itself.
for f in "$src"/*.rs; do
    case "$(basename "$f")" in
        lib.rs) ;;
        *) echo "layer rule: core/src/$(basename "$f") sits outside the layer folders" >&2; status=1 ;;
    esac
done

# Inside the kernel: the scheduler proper (the files below) may import
# anything in the kernel; every other kernel file is a leaf and may not
# name a scheduler file. The edges listed in `known_upward` predate this
# rule and are being removed; any other leaf-to-scheduler edge fails.
scheduler="runtime death handle stackless worker process join slab single wait"
known_upward=" plugin>runtime "
sched_re="crate::kernel::($(echo "$scheduler" | tr ' ' '|'))\\b"
while IFS= read -r file; do
    rel="${file#"$src/kernel/"}"
    rel="${rel%.rs}"
    top="${rel%%/*}"
    case " $scheduler " in *" $top "*) continue ;; esac
    while IFS= read -r target; do
        [ -n "$target" ] || continue
        case "$known_upward" in
            *" $rel>$target "*) ;;
            *)
                echo "layer rule: kernel leaf core/src/kernel/$rel.rs names the scheduler's $target" >&2
                status=1
                ;;
        esac
    done < <(grep -oE "$sched_re" "$file" | sed 's/crate::kernel:://' | sort -u)
done < <(find "$src/kernel" -name '*.rs' | sort)

if [ "$status" -eq 0 ]; then
    echo "layer rule holds: kernel <- sync <- otp <- actor; kernel leaves name no new scheduler file"
fi
exit "$status"
