#!/usr/bin/env bash
# Instructions per operation on the hot path, smarm beside tokio
# current_thread, counted by Valgrind's callgrind: yield, same-worker
# channel ping-pong (per round trip), spawn + join, same-worker actor
# ping-pong (per round trip; tokio's side is the mpsc pair of the
# `actors` bench), and an actor fanning messages out to 100 actors of
# another worker (per message, both workers' instructions; tokio's side is
# a multi_thread runtime of two workers, with tasks and mpsc channels).
# Each shape runs twice in a fresh runtime, one round of N operations and
# then three, and the figure is the difference over 2N: the runtime's
# start and end and its warm-up round (its slab, stack pool and allocator
# caches filling) cancel, leaving the steady state the criterion benches
# time.
#
# Times on a shared virtual machine move by a fifth between runs; these
# counts move by well under one percent (the two-worker fan-out by a few
# percent: its idle worker's looks are counted too), so they show whether
# a change does less work. They are not times: an atomic read-modify-write
# or a cache miss is one instruction here and tens of cycles on the CPU.
#
# Usage: benches/instructions.sh [N]   (default N = 10000)
# Output: a table on stdout and bench_results/instructions.csv.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
n="${1:-10000}"

if ! command -v valgrind > /dev/null; then
  echo "installing valgrind"
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q valgrind > /dev/null; else sudo apt-get install -y -q valgrind > /dev/null; fi
fi

cargo build -q -p smarm-benches --release --example instructions
bin="${CARGO_TARGET_DIR:-$root/target}/release/examples/instructions"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# Instructions the whole run of `shape peer rounds` executes.
count() {
  local out="$scratch/$1-$2-$3.out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" "$3" "$n" 2> "$scratch/log" \
    || { cat "$scratch/log" >&2; exit 1; }
  awk '/^summary:/ { print $2 }' "$out"
}

csv=bench_results/instructions.csv
echo "shape,peer,instructions_per_op" > "$csv"
printf '%-8s %10s %10s %8s\n' shape smarm tokio ratio
for shape in yield channel spawn actor fanout; do
  declare -A per
  for peer in smarm tokio; do
    small=$(count "$shape" "$peer" 1)
    large=$(count "$shape" "$peer" 3)
    per[$peer]=$(( (large - small) / (2 * n) ))
    echo "$shape,$peer,${per[$peer]}" >> "$csv"
  done
  printf '%-8s %10s %10s %8s\n' "$shape" "${per[smarm]}" "${per[tokio]}" \
    "$(awk -v a="${per[smarm]}" -v b="${per[tokio]}" 'BEGIN { printf "%.2f", a / b }')"
done
echo "(instructions per operation; $csv)"
