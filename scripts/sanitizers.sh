#!/usr/bin/env bash
# The service's tests and a short soak under ThreadSanitizer and under
# AddressSanitizer + UndefinedBehaviorSanitizer (issue 30), each in its own
# build directory (build-tsan, build-asan), building only what they run.
#   bash scripts/sanitizers.sh [tsan|asan|both]     (default both)
# Environment: SOAK_SECONDS (default 30), SOAK_MODEL (default
# ../shared/golden/models/granitehybrid.gguf), JOBS (default 2).
# Exit 1 when a test fails or a sanitizer reports (reports are also kept in
# build-*/sanitizer-logs/). Not part of scripts/test.sh or CI: a first
# sanitizer build takes 30+ minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-both}
soak_seconds=${SOAK_SECONDS:-30}
soak_model=${SOAK_MODEL:-../shared/golden/models/granitehybrid.gguf}
jobs=${JOBS:-2}
tests=(service_api_test service_host_test service_programs_test service_scheduling_test service_sessions_test
       service_e2e_test service_replica_test)
failed=0

# Reports go to <build>/sanitizer-logs/report.<pid> (log_path), from the
# test binaries and from the cairn-server children the soak starts alike.
run_one() {  # build directory, sanitizer name
  local build=$1 name=$2 log=$1/sanitizer-logs
  nice -n 10 ninja -C "$build" -j"$jobs" "${tests[@]}" cairn_soak cairn-server
  rm -rf "$log" && mkdir -p "$log"
  for t in "${tests[@]}"; do
    local bin
    bin=$(find "$build/tests/service" -name "$t" -type f -perm -u+x | head -1)
    echo "== $name $t"
    if ! "$bin" --gtest_brief=1 >"$log/$t.out" 2>&1; then
      echo "   FAILED (see $log/$t.out)"; failed=1
    fi
  done
  echo "== $name soak ($soak_seconds s)"
  if ! "$build/tests/service/soak/cairn_soak" --server="$build/service/cairn-server" --model="$soak_model" \
      --seconds="$soak_seconds" --threads=2 --max-rss-mib=4096 >"$log/soak.out" 2>&1; then
    echo "   FAILED (see $log/soak.out)"; failed=1
  fi
  tail -1 "$log/soak.out"
  local reports
  reports=$(find "$log" -name 'report.*' | wc -l)
  echo "== $name: $reports report file(s) in $log"
  [ "$reports" -eq 0 ] || failed=1
}

if [ "$which" = tsan ] || [ "$which" = both ]; then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_C_FLAGS=-fsanitize=thread \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >/dev/null
  export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 log_path=$PWD/build-tsan/sanitizer-logs/report"
  run_one build-tsan tsan
fi
if [ "$which" = asan ] || [ "$which" = both ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCAIRN_WERROR=ON -DCAIRN_ASAN=ON -DCAIRN_UBSAN=ON \
    >/dev/null
  export ASAN_OPTIONS="detect_leaks=1 log_path=$PWD/build-asan/sanitizer-logs/report"
  export UBSAN_OPTIONS="print_stacktrace=1 log_path=$PWD/build-asan/sanitizer-logs/report"
  run_one build-asan asan
fi
exit $failed
