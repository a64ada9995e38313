#!/usr/bin/env bash
# cairn-eval as a user runs it: golden logits in batch, step and chunk modes
# within 1e-4 x std with every argmax equal (--exact-activations), the
# default 8-bit-activation path on quantized files within 0.15 x std (and
# measurably not exact), packed weights equal to the file's rows, the
# output in the golden format, greedy generation
# equal to llama.cpp's, and errors with non-zero exits.
set -u
tool=$1
shared=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -d "$shared/golden" ]; then
  [ "${CI:-}" = "true" ] && fail "shared data missing under CI: $shared"
  echo "shared data not present ($shared): skipping"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
g=$shared/golden

check_line() {  # "max|diff| a  std b  max|diff|/std c  argmax k/n"
  local line=$1 what=$2
  local rel agree
  rel=$(echo "$line" | sed -n 's/.*max|diff|\/std \([^ ]*\).*/\1/p')
  agree=$(echo "$line" | sed -n 's/.*argmax \([0-9]*\/[0-9]*\).*/\1/p')
  [ -n "$rel" ] || fail "$what: no comparison printed ($line)"
  awk -v r="$rel" 'BEGIN { exit !(r < 1e-4) }' || fail "$what: max|diff|/std $rel >= 1e-4"
  [ "${agree%/*}" = "${agree#*/}" ] || fail "$what: argmax agreement $agree"
}

for model in llama qwen3 llama256-Q4_K_M; do
  for mode in batch step chunk:17; do
    line=$("$tool" --model "$g/models/$model.gguf" --tokens "$g/tokens.txt" --out "$tmp/$model.bin" \
           --mode "$mode" --compare "$g/logits/$model.bin" --exact-activations 2>"$tmp/err") ||
      fail "$model $mode: $(cat "$tmp/err")"
    check_line "$line" "$model $mode"
  done
  [ "$(stat -c %s "$tmp/$model.bin")" = "$(stat -c %s "$g/logits/$model.bin")" ] || fail "$model: output size differs"
done

# The default path on quantized weights: 8-bit activations, close to the
# exact logits but not equal to them.
for model in llama-q8 llama256-Q4_0; do
  line=$("$tool" --model "$g/models/$model.gguf" --tokens "$g/tokens.txt" --out "$tmp/$model.bin" \
         --compare "$g/logits/$model.bin" 2>"$tmp/err") || fail "$model fast: $(cat "$tmp/err")"
  rel=$(echo "$line" | sed -n 's/.*max|diff|\/std \([^ ]*\).*/\1/p')
  [ -n "$rel" ] || fail "$model fast: no comparison printed ($line)"
  awk -v r="$rel" 'BEGIN { exit !(r < 0.15 && r > 1e-4) }' || fail "$model fast: max|diff|/std $rel not in (1e-4, 0.15)"
done

# Weights packed at load (the default where this CPU's kernel packs) give the
# bits of the file's rows: the same output file, byte for byte.
for model in llama256-Q4_K_M llama256-Q4_0; do
  "$tool" --model "$g/models/$model.gguf" --tokens "$g/tokens.txt" --out "$tmp/packed.bin" --mode chunk:5 \
    2>"$tmp/err" >/dev/null || fail "$model packed: $(cat "$tmp/err")"
  "$tool" --model "$g/models/$model.gguf" --tokens "$g/tokens.txt" --out "$tmp/rows.bin" --mode chunk:5 \
    --no-pack-weights 2>"$tmp/err" >/dev/null || fail "$model rows: $(cat "$tmp/err")"
  cmp -s "$tmp/packed.bin" "$tmp/rows.bin" || fail "$model: packed weights and file rows give different logits"
done

# Greedy: the first continuation of the reference file, from the prompt's ids.
want=$(tr -d ' \n' <"$shared/models/stories260K_greedy.json" | grep -o '"tokens":\[[0-9,]*\]' | head -1 |
       sed 's/.*\[\(.*\)\]/\1/' | tr ',' ' ')
n=$(echo "$want" | wc -w)
prompt=$(head -1 "$g/tokenizer/stories260K-ids.txt")  # "Once upon a time"
got=$("$tool" --model "$shared/models/stories260K.gguf" --generate "$n" --prompt-tokens "$prompt") || fail "generate"
[ "$got" = "$want" ] || fail "greedy ids differ: got '$got' want '$want'"

# Errors: usage problems exit 2, failures exit 1 with the status on stderr.
"$tool" --model "$g/models/llama.gguf" --tokens "$g/tokens.txt" --out "$tmp/x" --mode chunk:0 2>/dev/null
[ $? -eq 2 ] || fail "chunk:0 accepted"
"$tool" --model "$g/models/llama.gguf" --bogus 1 2>/dev/null
[ $? -eq 2 ] || fail "unknown flag accepted"
"$tool" --model /nonexistent.gguf --tokens "$g/tokens.txt" --out "$tmp/x" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q NOT_FOUND "$tmp/err" || fail "missing model: $(cat "$tmp/err")"
echo "1 2 512" >"$tmp/bad.txt"
"$tool" --model "$g/models/llama.gguf" --tokens "$tmp/bad.txt" --out "$tmp/x" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q INVALID_ARGUMENT "$tmp/err" || fail "token 512 accepted: $(cat "$tmp/err")"
"$tool" --model "$g/models/llama.gguf" --family nosuch --tokens "$g/tokens.txt" --out "$tmp/x" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q NOT_FOUND "$tmp/err" || fail "unknown family accepted: $(cat "$tmp/err")"
echo "cairn-eval: golden logits in 3 modes, greedy ids and errors as expected"
