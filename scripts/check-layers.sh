#!/usr/bin/env bash
# Checks the one-way import rule between the layers of smarm-core:
#
#   kernel  imports nothing from sync, otp or actor
#   sync    imports only kernel
#   otp     imports kernel and sync
#   actor   imports kernel, sync and otp
#   inside kernel: a leaf file imports no scheduler file (runtime, death, handle, stackless, worker,
#   process, join, slab, single, wait)
#   inside actor: the files' imports of one another form no cycle (mod.rs only re-exports)
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
# name a scheduler file. An edge listed in `known_upward` (as " leaf>file ")
# would be tolerated; the list is empty and should stay so.
scheduler="runtime death handle stackless worker process join slab single wait"
known_upward=""
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

# Inside the actor layer: each file's references to its siblings (outside
# comments) are its edges — `crate::actor::NAME` or `super::NAME` names
# file NAME.rs when there is one, else something mod.rs re-exports (an
# edge to mod); in mod.rs, a path starting with a sibling's name. The
# edges must form no cycle (a depth-first search for a back edge).
actor="$src/actor"
declare -A edges=()
if [ -d "$actor" ]; then
    mods=" $(find "$actor" -maxdepth 1 -name '*.rs' -printf '%f\n' | sed 's/\.rs$//' | sort | tr '\n' ' ')"
    for file in "$actor"/*.rs; do
        me="$(basename "$file" .rs)"
        code="$(grep -vE '^[[:space:]]*//' "$file" || true)"
        if [ "$me" = mod ]; then
            names="$(grep -oE '(^|[^:[:alnum:]_])[a-z_][a-z0-9_]*::' <<<"$code" | grep -oE '[a-z_][a-z0-9_]*' || true)"
        else
            names="$( {
                grep -oE '(crate::actor|super)::[A-Za-z_][A-Za-z0-9_]*' <<<"$code" | sed -E 's/^(crate::actor|super):://'
                grep -oE '(crate::actor|super)::\{[^}]*\}' <<<"$code" | sed -E 's/^[^{]*\{//; s/\}$//' | tr ',' '\n' \
                    | sed -E 's/^[[:space:]]*//; s/::.*//; s/[[:space:]].*//'
            } || true)"
        fi
        out=""
        while IFS= read -r name; do
            [ -n "$name" ] || continue
            case "$mods" in
                *" $name "*) target="$name" ;;
                *) [ "$me" = mod ] && continue; target=mod ;;
            esac
            [ "$target" = "$me" ] && continue
            case " $out " in *" $target "*) ;; *) out="$out $target" ;; esac
        done <<<"$names"
        edges[$me]="$out"
    done
    declare -A colour=()
    cycle=""
    visit() {
        local node="$1" next
        colour[$node]=grey
        for next in ${edges[$node]:-}; do
            case "${colour[$next]:-white}" in
                grey) cycle="$node -> $next"; return 1 ;;
                white) visit "$next" || { cycle="$node -> $cycle"; return 1; } ;;
            esac
        done
        colour[$node]=black
    }
    for node in "${!edges[@]}"; do
        [ "${colour[$node]:-white}" = white ] || continue
        if ! visit "$node"; then
            echo "layer rule: core/src/actor imports in a cycle: $cycle" >&2
            status=1
            break
        fi
    done
fi

if [ "$status" -eq 0 ]; then
    echo "layer rule holds: kernel <- sync <- otp <- actor; kernel leaves name no scheduler file; actor files import without a cycle"
fi
exit "$status"
