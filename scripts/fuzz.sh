#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes the GGUF
# reader for a fixed time, seeded with the golden files when ../shared exists.
#   FUZZ_SECONDS=60 bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
build=build-fuzz

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCAIRN_FUZZ=ON -DCAIRN_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
ninja -C "$build" gguf_fuzz >/dev/null

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
seeds=0
if [ -d ../shared/golden ]; then
  # Small files only: the vocabulary files (several MB) would slow every run;
  # -max_len keeps the first 64 KiB of each seed (header, metadata, tensor table).
  while IFS= read -r f; do cp "$f" "$corpus/"; seeds=$((seeds + 1)); done \
    < <(find ../shared/golden -name '*.gguf' -size -2M)
fi
echo "fuzz: gguf reader for ${seconds}s with $seeds seed files"
"$build/tests/fuzz/gguf_fuzz" "$corpus" -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=4096 -print_final_stats=1 -print_pcs=0 2>&1 |
  grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==.*ERROR|SUMMARY|Done )' || true
# libFuzzer writes crash-* / leak-* / timeout-* files into the working
# directory when it finds something; its exit status says so too.
if ls crash-* leak-* timeout-* oom-* >/dev/null 2>&1; then
  echo "fuzz: found a failing input (see crash-*/leak-*/timeout-* files)" >&2
  exit 1
fi
