#!/bin/sh
# Checks the ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations with
# clang's thread-safety analysis (-Wthread-safety -Werror) on the annotated
# sources, compiled as the build compiles them (its compile_commands.json;
# generated headers come from that build). GCC ignores the annotations, so
# this is the only place they are enforced.
#   scripts/thread-safety.sh [BUILD_DIR]   (default: build; configure it first)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
clang=${CLANG:-clang++}
[ -f "$build/compile_commands.json" ] || { echo "no $build/compile_commands.json: configure $build first" >&2; exit 2; }
command -v "$clang" >/dev/null || { echo "$clang not found (scripts/setup.sh installs clang)" >&2; exit 2; }
# Every source under these folders that declares or takes a lock is checked:
# each .cc that names one, and the .cc of each header that declares one (a
# header with a lock and no .cc of its own is an error: nothing would check
# it). Found, not listed, so that a new file is not forgotten.
folders="checkpoint service"
# In these folders a std::mutex (which the analysis cannot see) is refused
# unless its line says why it cannot be an annotated absl::Mutex (a comment
# with "thread-safety:").
annotated_only="service"
lock_pattern='absl::Mutex|absl::MutexLock|absl::ReleasableMutexLock|std::mutex|std::lock_guard|std::unique_lock'
sources=$(
  for f in $(grep -rlE "$lock_pattern" --include='*.cc' $folders); do echo "$f"; done
  for h in $(grep -rlE "$lock_pattern" --include='*.h' $folders); do
    cc="${h%.h}.cc"
    [ -f "$cc" ] || { echo "$h declares a lock but has no $cc to check it with" >&2; echo "MISSING"; }
    echo "$cc"
  done | sort -u
)
case "$sources" in *MISSING*) exit 1;; esac
sources=$(printf '%s\n' $sources | sort -u)
bare=$(grep -rnE 'std::(mutex|lock_guard|unique_lock)' --include='*.h' --include='*.cc' $annotated_only |
       awk '{ code = $0; sub(/^[^:]*:[^:]*:/, "", code); sub(/\/\/.*/, "", code) }
            code ~ /std::(mutex|lock_guard|unique_lock)/ && $0 !~ /thread-safety:/' || true)
if [ -n "$bare" ]; then
  echo "std::mutex outside the analysis (use an annotated absl::Mutex, or say why not with 'thread-safety:'):" >&2
  echo "$bare" >&2
  exit 1
fi
exec python3 - "$build" "$clang" $sources <<'PY'
import json, os, shlex, subprocess, sys
build, clang, sources = sys.argv[1], sys.argv[2], sys.argv[3:]
commands = {os.path.realpath(os.path.join(c["directory"], c["file"])): c
            for c in json.load(open(os.path.join(build, "compile_commands.json")))}
failed = 0
for src in sources:
    c = commands.get(os.path.realpath(src))
    if c is None:
        sys.exit("%s is not in %s/compile_commands.json" % (src, build))
    args = shlex.split(c["command"]) if "command" in c else list(c["arguments"])
    while args and os.path.basename(args[0]) in ("ccache", "distcc"):
        args = args[1:]
    out = [clang]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
        elif a in ("-MD", "-MMD", "-c"):
            pass
        else:
            out.append(a)
    out += ["-fsyntax-only", "-Wthread-safety", "-Werror"]
    r = subprocess.run(out, cwd=c["directory"])
    print("%s: %s" % (src, "ok" if r.returncode == 0 else "FAILED"))
    failed += r.returncode != 0
sys.exit(1 if failed else 0)
PY
