#!/usr/bin/env bash
# cairn-template, run as a user would: every template of
# ../shared/chat_templates over its cases.json gives, byte for byte, the
# reference's expected/NAME.jsonl; bad input is a clear error.
set -u
tool=$1
shared=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$shared/chat_templates
if [ ! -f "$dir/cases.json" ]; then
  [ "${CI:-}" = "true" ] && fail "shared data missing under CI: $dir"
  echo "shared data not present ($dir): skipping"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

n=0
for t in "$dir"/templates/*.jinja; do
  name=$(basename "$t" .jinja)
  "$tool" --template "$t" --cases "$dir/cases.json" --out "$tmp/$name.jsonl" 2>"$tmp/err" || fail "$name: $(cat "$tmp/err")"
  cmp -s "$tmp/$name.jsonl" "$dir/expected/$name.jsonl" || fail "$name differs from expected/$name.jsonl"
  n=$((n + 1))
done
[ "$n" -eq 45 ] || fail "found $n templates, not 45"

"$tool" --help >"$tmp/out" || fail "--help failed"
grep -q 'usage: cairn-template --template' "$tmp/out" || fail "--help printed no usage"
"$tool" --template "$tmp/none.jinja" --cases "$dir/cases.json" --out "$tmp/x" 2>"$tmp/err" && fail "missing template accepted"
grep -q 'cannot read' "$tmp/err" || fail "missing template: $(cat "$tmp/err")"
echo '{"cases": [' >"$tmp/bad.json"
"$tool" --template "$dir/templates/Qwen-Qwen3-0.6B.jinja" --cases "$tmp/bad.json" --out "$tmp/x" 2>"$tmp/err" \
  && fail "malformed cases accepted"
grep -q 'not JSON with a "cases" array' "$tmp/err" || fail "malformed cases: $(cat "$tmp/err")"
printf '{%% if %%}' >"$tmp/broken.jinja"
"$tool" --template "$tmp/broken.jinja" --cases "$dir/cases.json" --out - >"$tmp/out" 2>"$tmp/err" \
  || fail "a template that does not parse should give error lines"
[ "$(grep -c '"error": "TemplateSyntaxError: ' "$tmp/out")" -eq 10 ] || fail "broken template: $(head -2 "$tmp/out")"
"$tool" --template x --cases y 2>"$tmp/err" && fail "missing --out accepted"
"$tool" --frobnicate 2>"$tmp/err" && fail "unknown argument accepted"
grep -q "unknown argument '--frobnicate'" "$tmp/err" || fail "unknown argument: $(cat "$tmp/err")"
echo "cairn-template: $n templates x 10 cases identical to the reference files; errors reported"
