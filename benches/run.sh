#!/usr/bin/env bash
# Runs smarm's criterion benchmarks and summarises them beside their peers.
#
#   benches/run.sh --full    measure properly, then write
#                            bench_results/summary.csv and ratios.png
#   benches/run.sh --quick   for CI: the benches build in the bench profile and
#                            run through the whole pipeline with tiny timings
#                            (and a small skynet tree), then write
#                            bench_results/summary-quick.csv and
#                            ratios-quick.png
#
# Besides `cargo bench` of every bench, a full run rebuilds and runs the
# `rq_runtime` bench once more per wake-ring feature (rq-mutex, rq-striped;
# the default build has rq-mpmc), so the summary holds each ring's runtime
# figures (a quick run leaves them out, and the summary says so). A feature
# whose build does not really select its ring is reported and skipped.
#
# --quick runs every bench for well under a second (0.02 s warm-up, 0.05 s
# measured, the minimum 10 samples, 1,000 bootstrap resamples instead of
# 100,000) instead of `cargo test --benches` / `-- --test`, which
# would run each routine once but write no estimates: this way CI also
# proves the summariser reads what criterion wrote. Its figures are not
# measurements, so they go to their own file and never overwrite the full
# summary.
#
# Honours CARGO_TARGET_DIR (relative to where you run this, as cargo does);
# otherwise uses target/ at the repository root.
set -euo pipefail

usage() {
    echo "usage: $0 [--quick|--full]   (default --full)" >&2
    exit 2
}

mode=full
case "${1:-}" in
"" | --full) mode=full ;;
--quick) mode=quick ;;
-h | --help) usage ;;
*)
    echo "$0: unknown argument: $1" >&2
    usage
    ;;
esac
[[ $# -le 1 ]] || usage

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ -n "${CARGO_TARGET_DIR:-}" ]]; then
    case "$CARGO_TARGET_DIR" in
    /*) target_dir="$CARGO_TARGET_DIR" ;;
    *) target_dir="$PWD/$CARGO_TARGET_DIR" ;;
    esac
else
    target_dir="$repo_root/target"
fi
# From here on cargo runs from the repository root, so pin the target dir to
# the absolute path worked out above.
export CARGO_TARGET_DIR="$target_dir"
cd "$repo_root"

# Measurements that are not criterion timings (memory, peers that could not
# run) are written here by the benches and read by the summariser.
export SMARM_BENCH_MEASUREMENTS="$target_dir/smarm-measurements"

# --noplot: the summary is the product; plots only cost time.
criterion_args=(--noplot)
if [[ $mode == quick ]]; then
    criterion_args+=(--warm-up-time 0.02 --measurement-time 0.05 --sample-size 10 --nresamples 1000)
    # Benches then keep these timings instead of their own longer ones.
    export SMARM_BENCH_QUICK=1
    summary=bench_results/summary-quick.csv
    chart=bench_results/ratios-quick.png
else
    unset SMARM_BENCH_QUICK
    summary=bench_results/summary.csv
    chart=bench_results/ratios.png
fi

# Anything criterion writes from now on is this run's; older figures make the
# summariser fail instead of being reported as current.
started="$(date +%s)"

cargo bench -p smarm-benches --benches -- "${criterion_args[@]}"

# rq_runtime once more per wake ring (full mode only: each ring is another
# build of the runtime, and CI tests the rings and checks the runtime's
# build with each on its own). The bench names its results after the ring
# compiled in; `--list` shows that name before anything runs.
rings=(rq-mutex rq-striped)
[[ $mode == quick ]] && rings=()
for feature in "${rings[@]}"; do
    ring="${feature#rq-}"
    listed="$(cargo bench -p smarm-benches --no-default-features --features "$feature" --bench rq_runtime -- --list)"
    if ! grep -q "^rq_runtime/[a-z_]*/$ring: benchmark" <<<"$listed"; then
        echo "run.sh: the $feature build does not use the $ring ring (it lists:" \
            "$(grep -o '^rq_runtime/[a-z_]*/[a-z]*' <<<"$listed" | head -1)); skipping it" >&2
        continue
    fi
    cargo bench -p smarm-benches --no-default-features --features "$feature" --bench rq_runtime -- "${criterion_args[@]}"
done

cargo run --quiet --release -p smarm-benches --bin summarize -- \
    --criterion-dir "$target_dir/criterion" \
    --measurements-dir "$SMARM_BENCH_MEASUREMENTS" \
    --since "$started" \
    --out "$repo_root/$summary" \
    --chart "$repo_root/$chart"
