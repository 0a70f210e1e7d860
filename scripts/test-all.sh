#!/usr/bin/env bash
# Runs every test smarm has, on a fresh machine as on a developer's:
#   1. installs what is missing (rustup targets and components, a nightly
#      toolchain with miri and rust-src, Debian packages); then format and the
#      core's layer rule (scripts/check-layers.sh);
#   2. host tests (unit, integration, doc) for the whole workspace (smarm-dist's
#      against real BEAM nodes from erlang-nox), the
#      second (plain, std-only) platform on its own, and every example; the
#      observer example's page in headless Chromium
#      (scripts/observer-browser-test.sh);
#   3. the soak suite in release (tests/tests/soak.rs);
#   4. no_std builds of core/arch/platform for x86_64, aarch64-linux and aarch64-none;
#   5. miri over the core's code that neither switches stacks nor calls the
#      platform (state word, rings, timers, slab bookkeeping);
#   6. the integration tests under AddressSanitizer (nightly, build-std);
#   7. the aarch64 suite under qemu-aarch64 (user mode);
#   8. the loom models (LOOM_MAX_PREEMPTIONS=2);
#   9. the bare-metal image booted under qemu-system-aarch64;
#  10. the benchmarks in quick mode (they compile and run once; speed is not asserted;
#      the Savina suite and the BEAM peers check their results),
#      and the HTTP bench under wrk in quick mode (benches/http.sh --quick),
#      and the instruction-count shapes once each (benches/instructions.sh).
# Usage: scripts/test-all.sh            (everything)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Each step prints the seconds it took when the next begins; the whole run
# prints them all at the end (a clean run is meant to stay under 30 minutes
# on 2 cores).
timings=()
step_name=""
step_start=$SECONDS
end_step() {
  if [ -n "$step_name" ]; then
    timings+=("$(printf '%5d s  %s' $((SECONDS - step_start)) "$step_name")")
  fi
}
step() {
  end_step
  step_name="$*"
  step_start=$SECONDS
  printf '\n==> %s  (at %d s)\n' "$*" "$SECONDS"
}
# A clean checkout is built once: incremental compilation only adds work.
export CARGO_INCREMENTAL=0
# Debug builds (the host and AArch64 suites, the examples) carry line
# tables only: a panic's backtrace still names file and line, and the
# workspace's test build takes a fifth less time (42 → 34 s on a quiet
# 2-core machine) and half the disk (1.9 → 1.1 GB).
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

step "install: rustup targets and Debian packages (only what is missing)"
need_targets=()
for t in aarch64-unknown-linux-gnu aarch64-unknown-none; do
  rustup target list --installed | grep -qx "$t" || need_targets+=("$t")
done
[ ${#need_targets[@]} -eq 0 ] || rustup target add "${need_targets[@]}"
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
# Nightly, for miri and AddressSanitizer (-Zsanitizer, -Zbuild-std): on a
# fresh machine, the newest nightly that ships both components.
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal --component miri,rust-src --allow-downgrade
fi
for c in miri rust-src; do
  rustup +nightly component list --installed | grep -q "^$c" || rustup +nightly component add "$c"
done
need_pkgs=()
# erlang-nox: the BEAM (erl, erlc, epmd, escript) that smarm-dist's tests
# and its cluster example talk to.
for p in qemu-user-static qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross erlang-nox; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need_pkgs[@]}"
fi

step "format"
cargo fmt --all --check
(cd qemu/image && cargo fmt --check)

step "core layers: kernel <- sync <- otp (one-way imports)"
scripts/check-layers.sh

step "host tests (x86_64)"
# Includes smarm-dist's tests against a real BEAM (dist/tests/beam.rs): each
# starts its own epmd on a private port and an `erl -sname` node, and stops
# both (about 5 s in all, beside the build).
cargo test --workspace --exclude smarm-benches

step "smarm alone and with each async io feature (futures-io, tokio-io): no warnings"
cargo clippy -q -p smarm -- -D warnings
cargo clippy -q -p smarm --features futures-io -- -D warnings
cargo clippy -q -p smarm --features tokio-io -- -D warnings

step "the tracing feature: runtime events reach a tracing subscriber"
cargo test -q -p smarm --features tracing --test tracing

step "second platform (std only: heap stacks, Instant, Mutex + Condvar): conformance kit and scenarios"
cargo test -q -p smarm-platform-plain

step "examples, at small sizes (each checks its own result)"
cargo build -q -p smarm -p smarm-arch --examples
for example in "tour --quick" "ping_pong 2000" "supervision_tree 5" "kv_server 200" "worker_pool 300" \
  "chat_server --selftest 5 5" "echo_server 10 10" "http_hello --selftest 10 100" "top 1" "actors" "multi_worker" "thread_ring 2 10000" \
  "observer --selftest"; do
  # shellcheck disable=SC2086 # the example's name and its arguments
  set -- $example
  name=$1
  shift
  echo "example $name $*"
  timeout 120 cargo run -q -p smarm --example "$name" -- "$@" > "$root/target/example-$name.out"
done
echo "example hyper_hello --selftest 10 50 (hyper in processes, the tokio-io feature)"
timeout 120 cargo run -q -p smarm --features tokio-io --example hyper_hello -- --selftest 10 50 \
  > "$root/target/example-hyper_hello.out"
# Written to a file, the tour is plain text: no carriage returns, no colour.
if grep -q $'\r\|\x1b' "$root/target/example-tour.out"; then
  echo "the tour wrote terminal control characters into a file" >&2
  exit 1
fi
cargo run -q -p smarm-arch --example switch_demo -- 100000 > /dev/null
# A smarm node in an Erlang cluster: an escript calls its kv gen_server and
# hands it a process to monitor (about 2 s; leaves `epmd -daemon` running).
timeout 120 cargo run -q -p smarm-dist --example cluster > "$root/target/example-cluster.out"

step "the observer page in headless Chromium (installs chromium; screenshot in target/ci-artifacts)"
# ~6 s beside the example's build; installing chromium on a fresh machine
# adds ~37 s (apt-get update and 146 MB of packages).
timeout 600 scripts/observer-browser-test.sh

step "clippy (warnings are errors)"
cargo clippy --workspace --exclude smarm-benches --all-targets -- -D warnings
cargo clippy -p smarm --features tracing --all-targets -- -D warnings

step "docs (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --exclude smarm-benches --features smarm-platform/linux

step "soak (release): a million spawns, ten million messages, mass stops, mass panics"
cargo test --release -p smarm-tests --test soak

step "no_std builds"
for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu aarch64-unknown-none; do
  cargo build -p smarm-arch -p smarm-platform -p smarm-core --target "$t"
done
cargo build -p smarm-core --target aarch64-unknown-none --no-default-features --features rq-striped
cargo build -p smarm-core --target aarch64-unknown-none --no-default-features --features rq-mutex

step "wake-ring variants (host)"
cargo test -p smarm-core --no-default-features --features rq-striped
cargo test -p smarm-core --no-default-features --features rq-mutex
# The runtime over each ring (the benches' quick mode no longer builds it).
cargo check -q -p smarm --no-default-features --features rq-striped
cargo check -q -p smarm --no-default-features --features rq-mutex

step "miri (strict provenance): state word, rings and envelopes, timers, slab bookkeeping, stackless cells"
# Only modules whose tests neither switch stacks (inline assembly) nor call
# the platform (mmap, clocks): miri can run neither.
# Miri interprets on one thread, so the tests run as two halves side by
# side on two cores (2 minutes instead of 3): the intrusive, mpmc and
# recycling rings, and all the rest.
export MIRIFLAGS="-Zmiri-strict-provenance"
cargo +nightly miri test -p smarm-core --lib --no-run
miri_log="$root/target/miri-halves"
mkdir -p "$miri_log"
cargo +nightly miri test -p smarm-core --lib -- kernel::ring::intrusive:: kernel::ring::mpmc:: \
  kernel::ring::recycle:: > "$miri_log/first.log" 2>&1 &
first=$!
cargo +nightly miri test -p smarm-core --lib -- kernel::state:: kernel::ring:: kernel::timer:: kernel::slab:: \
  kernel::segments:: kernel::stackless:: --skip kernel::ring::intrusive:: --skip kernel::ring::mpmc:: \
  --skip kernel::ring::recycle:: > "$miri_log/second.log" 2>&1 &
second=$!
miri_failed=0
wait "$first" || miri_failed=1
wait "$second" || miri_failed=1
cat "$miri_log/first.log" "$miri_log/second.log"
unset MIRIFLAGS
[ "$miri_failed" -eq 0 ] || { echo "miri found a problem (above)" >&2; exit 1; }

step "AddressSanitizer: the integration tests (nightly, build-std, fiber annotations)"
# `--cfg smarm_asan` compiles the core's fiber annotations
# (core/src/kernel/asan.rs); without them ASan misreads process stacks.
# detect_stack_use_after_return: frames also live on ASan's fake stacks,
# which the annotations must switch with each process; exercise that too.
# LeakSanitizer stays on: the suite leaves nothing behind.
# Line tables are all the debug information a report needs (file and line
# of each frame); the fuller default cost ~20 s more of build and links.
asan_log="$root/target/asan/test.log"
mkdir -p "$root/target/asan"
RUSTFLAGS="-Zsanitizer=address --cfg smarm_asan" CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
  ASAN_OPTIONS="detect_stack_use_after_return=1" CARGO_TARGET_DIR="$root/target/asan" \
  cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu --release -p smarm-tests 2>&1 |
  tee "$asan_log"
# ASan reports a process stack it cannot place only as a warning.
if grep -q "ASan is ignoring requested __asan_handle_no_return" "$asan_log"; then
  echo "ASan does not know a process stack: are the fiber annotations compiled in?" >&2
  exit 1
fi

step "aarch64 suite under qemu-aarch64"
# Every unit and integration test. The doc examples (API usage, the same on
# every target) and the example programs ran on the host above; compiling
# the doc examples again for aarch64 cost ~2 minutes, and the examples hold
# no tests of their own (built as test binaries, each ran none).
qemu/test-aarch64.sh --lib --bins --tests

step "loom models"
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR="$root/target/loom" \
  timeout 900 cargo test -p smarm-core --release --lib
# The sockets' readiness protocol (hosted/src/io/edge.rs): ~1 minute to
# build smarm under loom, the model itself runs in well under a second.
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR="$root/target/loom" \
  timeout 900 cargo test -p smarm --release --lib io::edge
# How the deadlock look reads a sleeping driver (hosted/src/engine/
# loom_models.rs): the same build, ~2 s of models.
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR="$root/target/loom" \
  timeout 900 cargo test -p smarm --release --lib engine::loom_models

step "bare-metal image under qemu-system-aarch64"
qemu/run-bare.sh

step "benchmarks (quick mode: they build and run once)"
# Their figures are neither kept nor profiled here: from now on release
# builds are optimised at level 1 and carry no debug information (the
# peers' dependency trees build in 3m20s instead of 3m57s at level 3).
export CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_BENCH_OPT_LEVEL=1
export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_BENCH_DEBUG=0
# Includes the BEAM beside the core benches and the Savina suite (smarm
# processes and actors, tokio, ractor, the BEAM on +S 1 and +S 2), each
# checking its result: erlang-nox is installed above, so a missing erl is
# an error here. Their two binaries add ~20 s of build and ~3 s of runs.
benches/run.sh --quick

step "HTTP under wrk, quick mode: smarm's http_hello beside tokio and hyper (installs wrk)"
# ~1 minute on 2 cores: the peers' release build, then five servers, a
# 2 s run and 1,000 idle connections each. Figures are not asserted.
benches/http.sh --quick

step "the instruction-count shapes, run once each at a small size (each checks its result)"
# benches/instructions.sh counts them under callgrind; here they only run
# (~15 s of release build, well under a second of runs).
for shape in yield channel spawn actor fanout; do
  for peer in smarm tokio; do
    cargo run -q -p smarm-benches --release --example instructions -- "$shape" "$peer" 1000
  done
done

end_step
printf '\nseconds per step:\n'
printf '%s\n' "${timings[@]}"
printf '%5d s  in all\n' "$SECONDS"
printf '\nall checks passed\n'
