#!/usr/bin/env bash
# HTTP/1.1 keep-alive "Hello, world!" under wrk: smarm's http_hello example
# (1 and 2 workers) beside the same httparse loop on tokio current_thread
# and multi_thread(2), hyper on tokio current_thread, and the same hyper
# service on smarm (the hyper_hello example: a process per connection, one
# worker).
#
# Per server: req/s, p50 and p99 at each connection count, CPU µs per
# request (the server's utime+stime over the run), syscalls per response
# (perf's raw_syscalls:sys_enter tracepoint on the server over the same run,
# or strace -c -f where perf cannot attach), resident memory
# per idle connection with IDLE connections held open, and the resident set
# after they close against before they opened.
#
# Every server listens on 127.0.0.1 only; servers run on CPU 0, wrk and the
# idle-connection holder on CPU 1 (taskset), when there are two CPUs. Every
# load loop is bounded in time (wrk -d, timeout).
#
# Usage: benches/http.sh [--quick]
#   --quick   2 s per run, c=100 only, 1,000 idle connections (CI: ~1 minute)
#   default   10 s per run, c=100 and c=1000, 10,000 idle connections
# Output: bench_results/http.csv (or http-quick.csv) and a table on stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=0
[ "${1:-}" = "--quick" ] && quick=1
if [ $quick = 1 ]; then
  duration=2; conns="100"; idle=1000; out=bench_results/http-quick.csv
else
  duration=10; conns="100 1000"; idle=10000; out=bench_results/http.csv
fi

need() {
  command -v "$1" > /dev/null && return
  echo "installing $2 (for $1)"
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q "$2" > /dev/null; else sudo apt-get install -y -q "$2" > /dev/null; fi
}
need wrk wrk
need strace strace
need taskset util-linux
# perf's syscall tracepoint counts without slowing the server; strace is
# the fallback where perf cannot attach.
use_perf=0
if perf stat -e raw_syscalls:sys_enter -- true > /dev/null 2>&1; then use_perf=1; fi

# Idle connections need descriptors on both ends.
ulimit -n "$(ulimit -Hn)" 2> /dev/null || true
if [ "$(ulimit -n)" -lt $((idle + 100)) ]; then
  idle=$(( $(ulimit -n) - 100 ))
  echo "descriptor limit $(ulimit -n): holding $idle idle connections"
fi

server_cpu=""; client_cpu=""
if [ "$(nproc)" -ge 2 ]; then server_cpu="taskset -c 0"; client_cpu="taskset -c 1"; fi

target="${CARGO_TARGET_DIR:-$root/target}"
cargo build -q --release -p smarm --example http_hello
cargo build -q --release -p smarm --features tokio-io --example hyper_hello
cargo build -q --release -p smarm-benches --example http_peer
hello="$target/release/examples/http_hello"
hyper_smarm="$target/release/examples/hyper_hello"
peer="$target/release/examples/http_peer"

port=18480
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2> /dev/null || true; }
trap cleanup EXIT

start_server() { # name -> sets pid
  port=$((port + 1))
  case "$1" in
    smarm-1) $server_cpu "$hello" 1 $port > /dev/null & ;;
    smarm-2) $server_cpu "$hello" 2 $port > /dev/null & ;;
    tokio-ct) $server_cpu "$peer" tokio-ct $port > /dev/null & ;;
    tokio-mt2) $server_cpu "$peer" tokio-mt2 $port > /dev/null & ;;
    hyper) $server_cpu "$peer" hyper $port > /dev/null & ;;
    hyper-smarm) $server_cpu "$hyper_smarm" --serve "127.0.0.1:$port" 1 3600 > /dev/null & ;;
  esac
  pid=$!
  for _ in $(seq 50); do
    (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && return
    sleep 0.1
  done
  echo "server $1 did not start" >&2; exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
# wrk's "123 requests in 2.00s" and its latency lines, in microseconds.
to_us() { awk '{v=$1; if (v ~ /us$/) {sub(/us/,"",v); print v} else if (v ~ /ms$/) {sub(/ms/,"",v); print v*1000} else if (v ~ /s$/) {sub(/s/,"",v); print v*1000000}}'; }

tick_hz=$(getconf CLK_TCK)
echo "server,connections,req_per_s,p50_us,p99_us,cpu_us_per_req,syscalls_per_resp,rss_kib_before,rss_kib_idle,idle_conns,rss_per_idle_kib,rss_kib_after_close" > "$out"
printf "%-10s %6s %10s %8s %8s %8s %9s %10s %12s\n" server conns req/s p50_us p99_us cpu_us sys/resp idle_KiB after/before
for server in smarm-1 tokio-ct hyper hyper-smarm smarm-2 tokio-mt2; do
  start_server $server
  sleep 0.3
  # Warm-up: a short bounded run.
  $client_cpu wrk -t1 -c100 -d1s "http://127.0.0.1:$port/" > /dev/null 2>&1 || true
  for c in $conns; do
    # Syscalls counted by perf's tracepoint over the same run (no slowdown);
    # without perf, by strace during it (which slows the server down).
    sys_out=$(mktemp)
    if [ $use_perf = 1 ]; then
      perf stat -x, -e raw_syscalls:sys_enter -p "$pid" -o "$sys_out" -- sleep $((duration + 1)) &
    else
      timeout -s INT $((duration + 2)) strace -c -f -q -p "$pid" -o "$sys_out" &
    fi
    counter=$!
    sleep 0.3
    before=$(cpu_ticks "$pid")
    result=$($client_cpu wrk -t1 -c"$c" -d${duration}s --latency "http://127.0.0.1:$port/" 2>&1 || true)
    after=$(cpu_ticks "$pid")
    wait $counter 2> /dev/null || true
    if [ $use_perf = 1 ]; then
      calls=$(awk -F, '/raw_syscalls/ {print $1}' "$sys_out")
    else
      calls=$(awk '/^[ ]*[0-9.]+[ ]+[0-9.]+[ ]+[0-9]+[ ]+[0-9]+/ {s += $4} END {print s+0}' "$sys_out")
    fi
    rm -f "$sys_out"
    syscalls=$(awk -v c="${calls:-0}" -v r="$(echo "$result" | awk '/requests in/ {print $1}')" 'BEGIN {if (r > 0) printf "%.2f", c / r; else print "nan"}')
    requests=$(echo "$result" | awk '/requests in/ {print $1}')
    rps=$(echo "$result" | awk '/Requests\/sec/ {print $2}')
    p50=$(echo "$result" | awk '$1 == "50%" {print $2}' | to_us)
    p99=$(echo "$result" | awk '$1 == "99%" {print $2}' | to_us)
    cpu=$(awk -v t=$((after - before)) -v r="${requests:-0}" -v hz="$tick_hz" 'BEGIN {if (r > 0) printf "%.2f", t * 1000000 / hz / r; else print "nan"}')
    rows+=("$server,$c,$rps,$p50,$p99,$cpu,$syscalls")
    printf "%-10s %6s %10s %8s %8s %8s %9s\n" $server "$c" "$rps" "$p50" "$p99" "$cpu" "$syscalls"
  done
  # Resident memory per idle connection, and after they close.
  sleep 0.5
  rss_before=$(rss_kib "$pid")
  fifo=$(mktemp -u); mkfifo "$fifo"
  $client_cpu timeout 120 "$peer" idle $idle $port < "$fifo" > "$fifo.out" &
  holder=$!
  exec 4> "$fifo"
  for _ in $(seq 600); do grep -q '^open' "$fifo.out" 2> /dev/null && break; sleep 0.1; done
  opened=$(awk '/^open/ {print $2}' "$fifo.out")
  sleep 1
  rss_idle=$(rss_kib "$pid")
  exec 4>&-
  wait $holder 2> /dev/null || true
  rm -f "$fifo" "$fifo.out"
  sleep 2
  rss_after=$(rss_kib "$pid")
  per=$(awk -v a="$rss_idle" -v b="$rss_before" -v n="${opened:-0}" 'BEGIN {if (n > 0) printf "%.2f", (a - b) / n; else print "nan"}')
  ratio=$(awk -v a="$rss_after" -v b="$rss_before" 'BEGIN {printf "%.2f", a / b}')
  printf "%-10s %6s %10s %8s %8s %8s %9s %10s %12s\n" $server "idle" "" "" "" "" "" "$per" "$ratio"
  for row in "${rows[@]}"; do
    echo "$row,$rss_before,$rss_idle,${opened:-0},$per,$rss_after" >> "$out"
  done
  rows=()
  kill "$pid"; wait "$pid" 2> /dev/null || true; pid=""
done
echo "wrote $out (load: $(cut -d' ' -f1-3 /proc/loadavg))"
