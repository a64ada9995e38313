#!/usr/bin/env bash
# The hardening load check (issue 16): cairn-server under ASan (with LeakSanitizer)
# and UBSan, loaded by 16 clients of which 4 stop reading, for LOAD_SECONDS (default 60).
#   bash scripts/asan-load.sh
# Samples the server's RSS every 5 s, then stops it with SIGTERM and fails (exit 1) on:
# a non-zero exit of the server, any sanitizer report in its stderr, or RSS that grew
# by more than PLATEAU_PCT % (default 10) over the last 30 s of the load.
# Environment: BUILD_DIR (default build-asan; another directory builds without
# sanitizers, to compare RSS), LOAD_SECONDS, CHECKPOINT_RAM (default 128MiB: the
# checkpoint store fills up to its budget, so a small one lets RSS settle within the
# run), MEMORY_BUDGET (default 512MiB), STALLED_SECONDS (default 10), PLATEAU_PCT.
# Not part of scripts/test.sh: it takes minutes (an ASan build and the load).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-asan}
seconds=${LOAD_SECONDS:-60}
plateau_pct=${PLATEAU_PCT:-10}
sanitize=OFF
[ "$build" = build-asan ] && sanitize=ON
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCAIRN_WERROR=ON \
  -DCAIRN_ASAN=$sanitize -DCAIRN_UBSAN=$sanitize >/dev/null
nice -n 10 ninja -C "$build" -j2 cairn-server cairn-load

# A small quarantine, so that RSS shows the program's memory, not ASan's
# 256 MiB of freed blocks held back.
export ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=16:malloc_context_size=10
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
log=$(mktemp -d)
: >"$log/server.err"
"$build/service/cairn-server" --listen=127.0.0.1:0 --model=demo-hybrid=demo-hybrid --threads=2 \
  --memory-budget="${MEMORY_BUDGET:-512MiB}" --checkpoint-ram="${CHECKPOINT_RAM:-128MiB}" \
  --stalled-stream-seconds="${STALLED_SECONDS:-10}" --log-level=warning --metrics-listen=127.0.0.1:0 \
  2>"$log/server.err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
port=
for _ in $(seq 600); do
  port=$(sed -n 's/^cairn-server: listening on port \([0-9]*\)$/\1/p' "$log/server.err")
  metrics_port=$(sed -n 's/^cairn-server: metrics on port \([0-9]*\)$/\1/p' "$log/server.err")
  [ -n "$port" ] && [ -n "$metrics_port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log/server.err" >&2; echo "asan-load: server did not start" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "asan-load: server did not report its port" >&2; exit 1; }

rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$pid/status"; }
# What the server's budgets account for, in MiB: the checkpoint store (--checkpoint-ram)
# and the live sequences (--memory-budget).
metric_mib() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" |
    awk -v m="$1" '$1 == m { printf "%.1f", $2 / 1048576; found = 1 } END { if (!found) printf "?" }'
}
"$build/service/cairn-load" --server="127.0.0.1:$port" --model=demo-hybrid --clients=16 --stalled-clients=4 \
  --seconds="$seconds" >"$log/load.out" 2>&1 &
load=$!
echo "   s  RSS MiB  checkpoints MiB  sequences MiB"
samples=()
t=0
while kill -0 "$load" 2>/dev/null; do
  samples+=("$(rss_kib)")
  printf '%4d  %7.1f  %15s  %13s\n' "$t" "$(echo "${samples[-1]} / 1024" | bc -l)" \
    "$(metric_mib cairn_checkpoint_store_ram_bytes)" "$(metric_mib cairn_sequence_memory_bytes)"
  sleep 5
  t=$((t + 5))
done
load_rc=0
wait "$load" || load_rc=$?
cat "$log/load.out"

kill -TERM "$pid"
server_rc=0
wait "$pid" || server_rc=$?
trap - EXIT
reports=$(grep -c -E 'ERROR: AddressSanitizer|runtime error:|LeakSanitizer' "$log/server.err" || true)

peak=$(printf '%s\n' "${samples[@]}" | sort -n | tail -1)
# The plateau: the last sample against the one 30 s (6 samples) before it.
n=${#samples[@]}
growth=0
if [ "$n" -gt 6 ]; then
  growth=$(echo "100 * (${samples[n - 1]} - ${samples[n - 7]}) / ${samples[n - 7]}" | bc -l)
fi
printf 'peak RSS %.1f MiB; last 30 s grew %.1f %% (limit %s %%)\n' "$(echo "$peak / 1024" | bc -l)" "$growth" "$plateau_pct"
echo "cairn-load exit $load_rc; server exit $server_rc; sanitizer reports $reports (server stderr: $log/server.err)"
fail=0
[ "$server_rc" -eq 0 ] || { echo "FAIL: server exit code $server_rc" >&2; fail=1; }
[ "$reports" -eq 0 ] || { grep -E -A20 'ERROR: AddressSanitizer|runtime error:|LeakSanitizer' "$log/server.err" | head -60 >&2; echo "FAIL: $reports sanitizer reports" >&2; fail=1; }
[ "$(echo "$growth < $plateau_pct" | bc)" -eq 1 ] || { echo "FAIL: RSS still growing" >&2; fail=1; }
[ "$load_rc" -eq 0 ] || { echo "FAIL: cairn-load reported failed requests" >&2; fail=1; }
exit $fail
