#!/usr/bin/env bash
# cairn-tokenize reproduces every golden of ../shared/golden/tokenizer byte for
# byte; bad arguments and files fail with a message on stderr.
set -u
tool=$1
shared=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
g=$shared/golden/tokenizer
if [ ! -d "$g" ]; then
  [ "${CI:-}" = "true" ] && fail "shared data missing under CI: $g"
  echo "shared data not present ($g): skipping"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check() {  # model texts golden [flags]
  "$tool" --model "$1" --in "$g/$2" --out "$tmp/ids" ${4:-} 2>"$tmp/err" || fail "$3: $(cat "$tmp/err")"
  cmp -s "$tmp/ids" "$g/$3" || { diff "$tmp/ids" "$g/$3" | head -5 >&2; fail "$3 differs"; }
  echo "ok $3 ($(wc -l < "$g/$3") lines)"
}
check "$shared/models/stories260K.gguf" texts.txt stories260K-ids.txt
check "$g/qwen3-vocab.gguf" texts.txt qwen3-ids.txt
check "$g/llama3-vocab.gguf" texts.txt llama3-ids.txt
check "$g/qwen3-vocab.gguf" special.txt qwen3-special-ids.txt --parse-special
check "$g/llama3-vocab.gguf" special.txt llama3-special-ids.txt --parse-special

# Without --parse-special the chat markers are plain text.
"$tool" --model "$g/qwen3-vocab.gguf" --in "$g/special.txt" --out "$tmp/plain" || fail "plain run"
grep -qw 151644 "$tmp/plain" && fail "<|im_start|> parsed without --parse-special"

"$tool" --model /nonexistent.gguf --in "$g/texts.txt" --out "$tmp/x" 2>"$tmp/err" && fail "missing model accepted"
[ -s "$tmp/err" ] || fail "no message for a missing model"
"$tool" --model "$g/qwen3-vocab.gguf" --in /nonexistent.txt --out "$tmp/x" 2>/dev/null && fail "missing input accepted"
"$tool" --model "$g/qwen3-vocab.gguf" 2>/dev/null && fail "missing arguments accepted"
printf 'bad \\q escape\n' > "$tmp/bad.txt"
"$tool" --model "$g/qwen3-vocab.gguf" --in "$tmp/bad.txt" --out "$tmp/x" 2>/dev/null && fail "bad escape accepted"
echo "PASS"
