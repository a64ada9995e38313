#!/bin/sh
# Formats every C++ source the repository tracks with .clang-format (Google
# style, 120 columns), or with --check lists the files that differ and fails.
# Generated files (their first line says "Generated ... Do not edit") are left
# as their generator writes them.
#   scripts/format.sh [--check]
set -eu
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format}
command -v "$format" >/dev/null || { echo "$format not found (scripts/setup.sh installs clang-format)" >&2; exit 2; }
check=false
[ "${1:-}" = "--check" ] && check=true
status=0
for f in $(git ls-files '*.cc' '*.h'); do
  head -n 1 "$f" | grep -q 'Generated .*Do not edit' && continue
  if $check; then
    if ! "$format" "$f" | cmp -s - "$f"; then echo "$f: not formatted (scripts/format.sh)"; status=1; fi
  else
    "$format" -i "$f"
  fi
done
exit $status
