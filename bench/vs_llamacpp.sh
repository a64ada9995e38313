#!/usr/bin/env bash
# cairn against llama.cpp on the same GGUF files: per file and thread count,
# alternately llama.cpp's `llama-bench -m FILE -p P -n D -t T -r 1` and cairn's
# `bench/forward --model FILE --threads T --prompt P --decode D --rounds 1`,
# ROUNDS times, then one table row of the medians: prompt tokens/s of
# llama.cpp and cairn and their ratio (cairn / llama.cpp), the same for decode.
# Both measure the same things: one P-token prompt on a fresh context, D
# single-token decode steps from position 0 (llama-bench's pp and tg tests).
#
#   bench/vs_llamacpp.sh [options] LLAMA_BUILD_DIR MODEL.gguf...
#     --rounds N        alternating rounds per file (default 3)
#     --threads LIST    comma-separated thread counts, a row each (default 2;
#                       1,2 prints the scaling)
#     --prompt P        prompt tokens (default 512)
#     --decode D        decoded tokens (default 32)
#     --cairn PATH      cairn's bench/forward (default build/bench/forward
#                       of this checkout)
#     --cairn-args ARGS extra arguments for bench/forward, word-split
#
# LLAMA_BUILD_DIR is llama.cpp's CMake build directory (llama-bench in bin/
# below it) or the bin directory itself. Each run's figures go to stderr, the
# table to stdout. On a shared machine absolute figures drift between runs:
# the alternation and the medians are there so the ratios stay comparable.
set -euo pipefail

usage() {
  sed -n '/^#   bench/,/^#     --cairn-args/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() {
  echo "vs_llamacpp.sh: $*" >&2
  exit 1
}

here=$(cd "$(dirname "$0")" && pwd)
rounds=3 threads=2 prompt=512 decode=32 cairn="$here/../build/bench/forward" cairn_args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds | --threads | --prompt | --decode | --cairn | --cairn-args)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --rounds) rounds=$2 ;;
        --threads) threads=$2 ;;
        --prompt) prompt=$2 ;;
        --decode) decode=$2 ;;
        --cairn) cairn=$2 ;;
        --cairn-args) cairn_args=$2 ;;
      esac
      shift 2
      ;;
    -h | --help) usage ;;
    --*) die "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || usage
for n in "$rounds" "$prompt" "$decode" ${threads//,/ }; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive whole number (--rounds, --threads, --prompt, --decode)"
done

llama_dir=$1
shift
[ -d "$llama_dir" ] || die "llama.cpp build directory '$llama_dir' does not exist"
llama_bench=""
for c in "$llama_dir/bin/llama-bench" "$llama_dir/llama-bench"; do
  if [ -x "$c" ]; then llama_bench=$c; break; fi
done
[ -n "$llama_bench" ] || die "no llama-bench in '$llama_dir/bin' or '$llama_dir' (build llama.cpp's llama-bench target)"
[ -x "$cairn" ] || die "cairn's bench/forward '$cairn' is missing (ninja -C build bench_forward, or --cairn PATH)"
for m in "$@"; do
  [ -f "$m" ] || die "model file '$m' does not exist"
done

# Median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }

# "PROMPT_TPS DECODE_TPS" of one llama-bench run (its JSON-lines output).
run_llama() {
  local out
  out=$("$llama_bench" -m "$1" -p "$prompt" -n "$decode" -t "$2" -r 1 -o jsonl 2>"$errfile") ||
    { cat "$errfile" >&2; die "llama-bench failed on $1"; }
  python3 -c '
import json, sys
pp = tg = None
for line in sys.stdin:
    r = json.loads(line)
    if r["n_gen"] == 0: pp = r["avg_ts"]
    if r["n_prompt"] == 0: tg = r["avg_ts"]
if pp is None or tg is None: sys.exit("llama-bench printed no pp or tg record")
print(pp, tg)' <<<"$out" || die "cannot read llama-bench's output on $1"
}

# "PROMPT_TPS DECODE_TPS" of one bench/forward run (its "median of" line).
run_cairn() {
  local out
  # shellcheck disable=SC2086  # --cairn-args is word-split on purpose
  out=$("$cairn" --model "$1" --threads "$2" --prompt "$prompt" --decode "$decode" --rounds 1 $cairn_args \
    2>"$errfile") || { cat "$errfile" >&2; die "bench/forward failed on $1"; }
  sed -n 's/^median of .*prompt (pp[0-9]*) \([0-9.]*\) tokens\/s, decode (tg[0-9]*) \([0-9.]*\) tokens\/s.*/\1 \2/p' \
    <<<"$out" | grep . || die "cannot read bench/forward's output on $1"
}
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT

rows=()
for m in "$@"; do
  for t in ${threads//,/ }; do
    lp=() ld=() cp=() cd=()
    for ((r = 1; r <= rounds; ++r)); do
      read -r p d < <(run_llama "$m" "$t")
      lp+=("$p") ld+=("$d")
      read -r p2 d2 < <(run_cairn "$m" "$t")
      cp+=("$p2") cd+=("$d2")
      echo "$(basename "$m") t$t round $r: llama.cpp pp $p tg $d | cairn pp $p2 tg $d2" >&2
    done
    rows+=("$(printf '%s\n' "$(basename "$m" .gguf)" "$t" \
      "$(printf '%s\n' "${lp[@]}" | median)" "$(printf '%s\n' "${cp[@]}" | median)" \
      "$(printf '%s\n' "${ld[@]}" | median)" "$(printf '%s\n' "${cd[@]}" | median)" | paste -sd' ')")
  done
done

echo "llama-bench -p $prompt -n $decode vs bench/forward${cairn_args:+ $cairn_args}, medians of $rounds alternating rounds"
echo "| file | threads | prompt t/s llama.cpp | cairn | ratio | decode t/s llama.cpp | cairn | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  awk '{ printf "| %s | %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", $1, $2, $3, $4, $4 / $3, $5, $6, $6 / $5 }' <<<"$row"
done
