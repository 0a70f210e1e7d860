#!/usr/bin/env bash
# The observer page (hosted/examples/observer) in a real browser: starts the
# observer example, loads its page in headless Chromium, and checks that the
# rendered DOM shows the live workload — four workers, the registered names,
# the supervision tree, a non-zero message rate computed by the page's
# script. Keeps a screenshot at target/ci-artifacts/observer.png.
#
# Installs Debian's chromium if it is missing (about 35 s on a fresh
# machine). Every wait is bounded; the server is stopped on exit.
# Usage: scripts/observer-browser-test.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
started=$SECONDS

if ! command -v chromium > /dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
  echo "chromium installed in $((SECONDS - started)) s"
fi

artifacts="$root/target/ci-artifacts"
mkdir -p "$artifacts"
cargo build -q -p smarm --example observer
binary="${CARGO_TARGET_DIR:-$root/target}/debug/examples/observer"

log="$artifacts/observer-server.log"
profile="$(mktemp -d)"
# Bounded twice: the example serves 120 s at most, and `timeout` ends it
# if it does not stop by itself.
timeout 150 "$binary" --serve 120 > "$log" 2>&1 &
server=$!
cleanup() {
  kill "$server" 2> /dev/null || true
  wait "$server" 2> /dev/null || true
  rm -rf "$profile"
}
trap cleanup EXIT

url=""
for _ in $(seq 100); do
  url="$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$log" || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "the observer did not print its address within 10 s:" >&2
  cat "$log" >&2
  exit 1
fi
# The page's rates come from the sampler's history (a sample every 250 ms):
# give it a few samples before the browser looks.
sleep 1.5

# Headless Chromium; in virtual time the page's 500 ms polls run back to
# back, each waiting for its fetches.
browser() {
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$profile" --virtual-time-budget=5000 "$@" 2> "$artifacts/chromium.log"
}
dom="$artifacts/observer-dom.html"
browser --dump-dom "$url" > "$dom"
screenshot="$artifacts/observer.png"
rm -f "$screenshot"
browser --window-size=1280,900 --screenshot="$screenshot" "$url" > /dev/null

failed=0
expect() { # description, extended regex that the DOM must match
  if grep -Eq -- "$2" "$dom"; then
    echo "ok: $1"
  else
    echo "FAILED: $1 (no match for $2)" >&2
    failed=1
  fi
}
expect "four workers in the header" 'id="sys-workers" data-value="4"'
expect "live processes counted in the header" 'id="sys-processes" data-value="[1-9]'
expect "four rows in the worker table" 'id="w3-switches" data-value="[1-9]'
expect "the page polled successfully" 'id="status" class="status live"'
expect "a non-zero message rate, computed by the page" 'id="rate-messages" data-value="[1-9][0-9]*"'
expect "a non-zero switch rate, computed by the page" 'id="rate-switches" data-value="[1-9][0-9]*"'
for name in logger spawner thrower app_sup db_pool bouncer_0 observer; do
  expect "process table: $name" "<tr [^>]*data-name=\"$name\""
done
expect "app_sup is listed as a supervisor" 'data-name="app_sup" data-kind="supervisor"'
expect "bouncer_0 is listed as an actor" 'data-name="bouncer_0" data-kind="actor"'
for node in app_sup db pool cache web router sessions flaky logger; do
  expect "tree: $node" "<li data-node=\"$node\""
done
echo "message rate shown: $(grep -Eo 'id="rate-messages" data-value="[0-9]*"' "$dom" | grep -Eo '[0-9]+' || true) /s"

# A PNG: the 8-byte signature, and more than a blank page's few bytes.
signature="$(head -c 8 "$screenshot" 2> /dev/null | od -An -tx1 | tr -d ' \n')"
size="$(stat -c %s "$screenshot" 2> /dev/null || echo 0)"
if [ "$signature" = "89504e470d0a1a0a" ] && [ "$size" -gt 10000 ]; then
  echo "ok: screenshot $screenshot ($size bytes)"
else
  echo "FAILED: no PNG screenshot at $screenshot (signature '$signature', $size bytes)" >&2
  failed=1
fi

if [ "$failed" -ne 0 ]; then
  echo "the rendered DOM is at $dom, the server's log at $log" >&2
  exit 1
fi
echo "observer page checked in a browser in $((SECONDS - started)) s"
