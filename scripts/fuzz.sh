#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes, each for
# a fixed time: the GGUF reader (seeded with the golden files when ../shared
# exists), the metrics HTTP endpoint (seeded with a few requests), the Jinja
# interpreter (seeded with ../shared's 45 chat templates when present), the
# chat output parser (seeded with a reply per format, and with the renderings
# of ../shared/chat_templates when it exists), and the tokenizers (with
# ../shared's vocabularies; skipped without them, an error under CI=true).
#   FUZZ_SECONDS=60 bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
build=build-fuzz

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCAIRN_FUZZ=ON -DCAIRN_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
ninja -C "$build" gguf_fuzz tokenizer_fuzz metrics_http_fuzz jinja_fuzz chat_output_fuzz >/dev/null

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
chat_corpus=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$corpus" "$text_corpus" "$http_corpus" "$jinja_corpus" "$chat_corpus" "$log"' EXIT
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

# Seeds: the first byte picks the format (its index in chat/output/
# output_format.h's AllOutputFormats: 0 none, 1 think, 2 hermes, 3 qwen-xml,
# 4 llama3, 5 harmony, 6 nemotron, 7 granite, 8 lfm2, 9 deepseek, 10
# kimi-k2, 11 mistral, 12 functionary, 13 glm, 14 apriel, 15 cohere, 16
# minimax-m2, 17 deepseek-v4, 18 gemma4), the second starts_in_reasoning
# (bit 0) and the split points.
printf '\x01\x05The user asks.\n</think>\n\nHello <b>!' > "$chat_corpus/think"
printf '\x02\x02<think>x</think><tool_call>\n{"name": "f", "arguments": {"a": [1, "</tool_call>"]}}\n</tool_call>' > "$chat_corpus/hermes"
printf '\x03\x04Let me.\n\n<tool_call>\n<function=f>\n<parameter=a>\n5\n</parameter>\n</function>\n</tool_call>' > "$chat_corpus/qwen"
printf '\x04\x06{"name": "f", "parameters": {"x": 1}}; <|python_tag|>b.call(q="x")' > "$chat_corpus/llama"
printf '\x05\x08<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>' > "$chat_corpus/harmony"
printf '\x08\x0a<|tool_call_start|>[f(a=1, b=[True, None], c={"k": (1,)})]<|tool_call_end|>' > "$chat_corpus/lfm2"
printf '\x0b\x0c[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{"a": 1}[TOOL_CALLS][{"name": "g", "arguments": {}}]' > "$chat_corpus/mistral"
printf '\x0a\x0e<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>' > "$chat_corpus/kimi"
printf '\x0d\x10<tool_call>f<arg_key>a</arg_key><arg_value>{"b": 2}</arg_value></tool_call>' > "$chat_corpus/glm"
printf '\x10\x12<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1</parameter>\n</invoke>\n</minimax:tool_call>' > "$chat_corpus/minimax"
printf '\x12\x14<|channel>thought\nx<channel|><|tool_call>call:f{a:<|"|>s<|"|>,b:[1,true]}<tool_call|>' > "$chat_corpus/gemma4"
n=11
if [ -d ../shared/chat_templates/expected ]; then
  # Every rendering (prompts and replies of real templates), with formats
  # and split points spread over the seeds.
  n=$(python3 - "$chat_corpus" ../shared/chat_templates/expected/*.jsonl <<'PY'
import json, sys
out, n = sys.argv[1], 0
for path in sys.argv[2:]:
    for line in open(path, encoding="utf-8"):
        case = json.loads(line)
        if "text" in case:
            with open(f"{out}/render{n}", "wb") as f:
                f.write(bytes([n % 19, n % 251]) + case["text"].encode("utf-8"))
            n += 1
print(n + 11)
PY
)
fi
echo "fuzz: chat output parser for ${seconds}s with $n seed replies"
run_fuzzer chat_output_fuzz "$chat_corpus" 8192

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
