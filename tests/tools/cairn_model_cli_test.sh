#!/usr/bin/env bash
# cairn-model info works on every GGUF under ../shared; dequant writes the
# reference values; errors go to stderr with a non-zero exit.
set -u
tool=$1
shared=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -d "$shared/golden" ]; then
  [ "${CI:-}" = "true" ] && fail "shared data missing under CI: $shared"
  echo "shared data not present ($shared): skipping"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

n=0
while IFS= read -r f; do
  "$tool" info "$f" >"$tmp/out" 2>"$tmp/err" || fail "info $f: $(cat "$tmp/err")"
  grep -q '^architecture:' "$tmp/out" || fail "info $f: no architecture line"
  grep -q '^tensors (' "$tmp/out" || fail "info $f: no tensor table"
  n=$((n + 1))
done < <(find "$shared/golden" "$shared/models" -name '*.gguf')
[ "$n" -ge 23 ] || fail "only $n files found"
"$tool" info "$shared/models/stories260K.gguf" | grep -q 'vocabulary size *512' || fail "stories260K vocabulary"

for q in q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k; do
  "$tool" dequant "$shared/golden/quants/$q.gguf" quantized "$tmp/got" 2>/dev/null || fail "dequant $q"
  "$tool" dequant "$shared/golden/quants/$q.gguf" expected "$tmp/want" 2>/dev/null || fail "dequant expected $q"
  cmp -s "$tmp/got" "$tmp/want" || fail "dequant $q differs from the reference"
done

"$tool" info /nonexistent.gguf >"$tmp/out" 2>"$tmp/err" && fail "missing file accepted"
grep -q 'NOT_FOUND' "$tmp/err" || fail "missing file: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "error printed to stdout"
"$tool" dequant "$shared/golden/quants/q8_0.gguf" nosuch "$tmp/x" 2>"$tmp/err" && fail "unknown tensor accepted"
grep -q "tensor 'nosuch' not found" "$tmp/err" || fail "unknown tensor: $(cat "$tmp/err")"
head -c 100 "$shared/golden/models/llama.gguf" >"$tmp/trunc.gguf"
"$tool" info "$tmp/trunc.gguf" 2>"$tmp/err" >/dev/null && fail "truncated file accepted"
grep -q 'OUT_OF_RANGE' "$tmp/err" || fail "truncated: $(cat "$tmp/err")"
"$tool" 2>/dev/null && fail "no arguments accepted"
echo "cairn-model: $n files inspected, 8 dequantizations exact, errors reported"
