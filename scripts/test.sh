#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds everything and runs every test.
#   bash scripts/test.sh
# Environment: CI=true turns warnings into errors and makes tests that need
# ../shared fail (instead of skip) when it is missing; FUZZ_SECONDS sets the
# fuzzing time (default 60, 0 skips fuzzing).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCAIRN_WERROR=$werror >/dev/null
ninja -C build -j"$(nproc)"
# The lock annotations (ABSL_GUARDED_BY), checked by clang.
sh scripts/thread-safety.sh build
# Every C++ source as .clang-format formats it.
sh scripts/format.sh --check

if [ "${FUZZ_SECONDS:-60}" != "0" ]; then
  bash scripts/fuzz.sh
fi

ctest --test-dir build --output-on-failure -j"$(nproc)"
