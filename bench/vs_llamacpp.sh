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
#     --baseline PATH   another bench/forward (e.g. built from an earlier
#                       commit), run after cairn in each round with the
#                       same arguments: a second table, the before of a
#                       before/after taken in one sitting
#     --server PATH     a cairn-server binary: each round also measures
#                       through it (bench/server_speed.py: a fresh server,
#                       a P-token prompt, then a D-token greedy reply to a
#                       one-token prompt as llama-bench's tg, the server's
#                       own Timings over gRPC): one more table,
#                       cairn-server against llama.cpp
#
# LLAMA_BUILD_DIR is llama.cpp's CMake build directory (llama-bench in bin/
# below it) or the bin directory itself. Each run's figures go to stderr, the
# table to stdout. PYTHON names the Python with grpcio for --server (default
# python3). On a shared machine absolute figures drift between runs:
# the alternation and the medians are there so the ratios stay comparable.
set -euo pipefail

usage() {
  sed -n '/^#   bench/,/^#                       before\/after/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() {
  echo "vs_llamacpp.sh: $*" >&2
  exit 1
}

here=$(cd "$(dirname "$0")" && pwd)
rounds=3 threads=2 prompt=512 decode=32 cairn="$here/../build/bench/forward" cairn_args="" baseline="" server=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds | --threads | --prompt | --decode | --cairn | --cairn-args | --baseline | --server)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --rounds) rounds=$2 ;;
        --threads) threads=$2 ;;
        --prompt) prompt=$2 ;;
        --decode) decode=$2 ;;
        --cairn) cairn=$2 ;;
        --cairn-args) cairn_args=$2 ;;
        --baseline) baseline=$2 ;;
        --server) server=$2 ;;
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
[ -z "$baseline" ] || [ -x "$baseline" ] || die "the baseline bench/forward '$baseline' is missing"
[ -z "$server" ] || [ -x "$server" ] || die "the cairn-server binary '$server' is missing"
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

# "PROMPT_TPS DECODE_TPS" from the "median of" line of bench/forward's
# format in OUTPUT: medians_of OUTPUT PROGRAM MODEL.
medians_of() {
  sed -n 's/^median of .*prompt (pp[0-9]*) \([0-9.]*\) tokens\/s, decode (tg[0-9]*) \([0-9.]*\) tokens\/s.*/\1 \2/p' \
    <<<"$1" | grep . || die "cannot read $2's output on $3"
}

# "PROMPT_TPS DECODE_TPS" of one bench/forward run (its "median of" line):
# run_cairn MODEL THREADS [BINARY].
run_cairn() {
  local out
  # shellcheck disable=SC2086  # --cairn-args is word-split on purpose
  out=$("${3:-$cairn}" --model "$1" --threads "$2" --prompt "$prompt" --decode "$decode" --rounds 1 $cairn_args \
    2>"$errfile") || { cat "$errfile" >&2; die "bench/forward failed on $1"; }
  medians_of "$out" "bench/forward" "$1"
}
# The same through a fresh cairn-server: run_server MODEL THREADS.
run_server() {
  local out
  out=$("${PYTHON:-python3}" "$here/server_speed.py" --cairn-server "$server" --model "$1" --threads "$2" \
    --prompt "$prompt" --decode "$decode" --rounds 1 2>"$errfile") ||
    { cat "$errfile" >&2; die "bench/server_speed.py failed on $1"; }
  medians_of "$out" "bench/server_speed.py" "$1"
}
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT

# One table row of medians: "FILE THREADS LLAMA_PP CAIRN_PP LLAMA_TG CAIRN_TG"
# from the file, the thread count and four space-separated lists.
# shellcheck disable=SC2086  # the lists are word-split on purpose
row_of() {
  printf '%s\n' "$1" "$2" "$(printf '%s\n' $3 | median)" "$(printf '%s\n' $4 | median)" \
    "$(printf '%s\n' $5 | median)" "$(printf '%s\n' $6 | median)" | paste -sd' '
}

rows=() base_rows=() server_rows=()
for m in "$@"; do
  for t in ${threads//,/ }; do
    lp=() ld=() cp=() cd=() bp=() bd=() sp=() sd=()
    for ((r = 1; r <= rounds; ++r)); do
      read -r p d < <(run_llama "$m" "$t")
      lp+=("$p") ld+=("$d")
      read -r p2 d2 < <(run_cairn "$m" "$t")
      cp+=("$p2") cd+=("$d2")
      line="$(basename "$m") t$t round $r: llama.cpp pp $p tg $d | cairn pp $p2 tg $d2"
      if [ -n "$baseline" ]; then
        read -r p3 d3 < <(run_cairn "$m" "$t" "$baseline")
        bp+=("$p3") bd+=("$d3")
        line="$line | baseline pp $p3 tg $d3"
      fi
      if [ -n "$server" ]; then
        read -r p4 d4 < <(run_server "$m" "$t")
        sp+=("$p4") sd+=("$d4")
        line="$line | cairn-server pp $p4 tg $d4"
      fi
      echo "$line" >&2
    done
    name=$(basename "$m" .gguf)
    rows+=("$(row_of "$name" "$t" "${lp[*]}" "${cp[*]}" "${ld[*]}" "${cd[*]}")")
    [ -z "$baseline" ] || base_rows+=("$(row_of "$name" "$t" "${lp[*]}" "${bp[*]}" "${ld[*]}" "${bd[*]}")")
    [ -z "$server" ] || server_rows+=("$(row_of "$name" "$t" "${lp[*]}" "${sp[*]}" "${ld[*]}" "${sd[*]}")")
  done
done

# table TITLE ROW...: the rows as a Markdown table, ratios cairn / llama.cpp.
table() {
  echo "$1"
  shift
  echo "| file | threads | prompt t/s llama.cpp | cairn | ratio | decode t/s llama.cpp | cairn | ratio |"
  echo "|---|---|---|---|---|---|---|---|"
  for row in "$@"; do
    awk '{ printf "| %s | %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", $1, $2, $3, $4, $4 / $3, $5, $6, $6 / $5 }' <<<"$row"
  done
}
table "llama-bench -p $prompt -n $decode vs bench/forward${cairn_args:+ $cairn_args}, medians of $rounds alternating rounds" \
  "${rows[@]}"
if [ -n "$baseline" ]; then
  echo
  table "the same rounds, the baseline $baseline in the cairn columns" "${base_rows[@]}"
fi
if [ -n "$server" ]; then
  echo
  table "the same rounds through cairn-server (bench/server_speed.py: the server's Timings over gRPC) in the cairn columns" \
    "${server_rows[@]}"
fi
