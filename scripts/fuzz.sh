#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes, each for
# a fixed time: the GGUF reader (seeded with the golden files when ../shared
# exists), the metrics HTTP endpoint (seeded with a few requests), the Jinja
# interpreter (seeded with ../shared's 45 chat templates when present), and
# the tokenizers (with ../shared's vocabularies; skipped without them, an
# error under CI=true).
#   FUZZ_SECONDS=60 bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
build=build-fuzz

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCAIRN_FUZZ=ON -DCAIRN_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
ninja -C "$build" gguf_fuzz tokenizer_fuzz metrics_http_fuzz jinja_fuzz >/dev/null

# Runs one target on a seed corpus, showing libFuzzer's own summary lines
# only. libFuzzer exits non-zero when it finds a crash, leak, timeout or OOM
# (and writes the input to crash-*/leak-*/timeout-*/oom-* here); that marks
# the run failed.
failed=()
run_fuzzer() {
  local status=0
  "$build/tests/fuzz/$1" "$2" -max_total_time="$seconds" -max_len="$3" \
    -rss_limit_mb=4096 -print_final_stats=1 -print_pcs=0 "${@:4}" >"$log" 2>&1 || status=$?
  grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==.*ERROR|SUMMARY|Done |tokenizer_fuzz:|jinja_fuzz:)' "$log" || true
  if [ "$status" -ne 0 ]; then failed+=("$1 (exit $status)"); fi
}

corpus=$(mktemp -d)
text_corpus=$(mktemp -d)
http_corpus=$(mktemp -d)
jinja_corpus=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$corpus" "$text_corpus" "$http_corpus" "$jinja_corpus" "$log"' EXIT
seeds=0
if [ -d ../shared/golden ]; then
  # Small files only: the vocabulary files (several MB) would slow every run;
  # -max_len keeps the first 64 KiB of each seed (header, metadata, tensor table).
  while IFS= read -r f; do cp "$f" "$corpus/"; seeds=$((seeds + 1)); done \
    < <(find ../shared/golden -name '*.gguf' -size -2M)
fi
echo "fuzz: gguf reader for ${seconds}s with $seeds seed files"
run_fuzzer gguf_fuzz "$corpus" 65536

printf 'GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n' > "$http_corpus/get"
printf 'HEAD /metrics?x=1 HTTP/1.0\n\n' > "$http_corpus/head"
printf 'POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc' > "$http_corpus/post"
echo "fuzz: metrics HTTP endpoint for ${seconds}s"
run_fuzzer metrics_http_fuzz "$http_corpus" 1024

# A few templates of every construct, and the real ones when ../shared has them.
printf '{%% for m in messages %%}<|im_start|>{{ m.role }}\n{{ m.content|trim }}<|im_end|>\n{%% endfor %%}' \
  > "$jinja_corpus/chatml"
printf '{%% macro f(x, y=2) %%}{{ x ~ y }}{{ caller() if caller is defined }}{%% endmacro %%}{%% set ns = namespace(a=[]) %%}{{ f(1) }}{{ tools|tojson(indent=2) }}' \
  > "$jinja_corpus/macro"
printf '{%%- if messages[0].role == "system" -%%}{{ raise_exception("no") }}{%%- endif -%%}{{ "%%s" %% (1,) }}{{ range(3)|map("string")|join(",") }}' \
  > "$jinja_corpus/errors"
jinja_seeds=3
if [ -d ../shared/chat_templates/templates ]; then
  cp ../shared/chat_templates/templates/*.jinja "$jinja_corpus/"
  jinja_seeds=$(find "$jinja_corpus" -type f | wc -l)
fi
echo "fuzz: Jinja interpreter for ${seconds}s with $jinja_seeds seed templates"
run_fuzzer jinja_fuzz "$jinja_corpus" 32768 -dict=tests/fuzz/jinja.dict -timeout=20

if [ -d ../shared/golden/tokenizer ] && [ -f ../shared/models/stories260K.gguf ]; then
  # Seeds: every golden tokenizer text, once per vocabulary (first byte) with
  # plain options (second byte).
  n=0
  for f in ../shared/golden/tokenizer/texts.txt ../shared/golden/tokenizer/special.txt; do
    while IFS= read -r line; do
      for v in 0 1 2; do
        printf "\\x0$v\\x00%s" "$line" > "$text_corpus/seed$n"
        n=$((n + 1))
      done
    done < "$f"
  done
  echo "fuzz: tokenizers (stories260K SPM, qwen3 and llama3 BPE) for ${seconds}s with $n seed texts"
  CAIRN_SHARED_DIR=../shared run_fuzzer tokenizer_fuzz "$text_corpus" 4096
elif [ "${CI:-}" = "true" ]; then
  echo "fuzz: ../shared is missing: cannot fuzz the tokenizers" >&2
  exit 1
else
  echo "fuzz: skipping the tokenizers: ../shared is missing (its vocabularies are the fuzzer's)"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: found a failing input in ${failed[*]} (see the crash-*/leak-*/timeout-*/oom-* files)" >&2
  exit 1
fi
