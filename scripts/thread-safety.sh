#!/bin/sh
# Checks the ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations with
# clang's thread-safety analysis (-Wthread-safety -Werror) on every source
# that has a lock, compiled as the build compiles it (its
# compile_commands.json; generated headers come from that build). GCC ignores
# the annotations, so this is the only place they are enforced.
#   scripts/thread-safety.sh [BUILD_DIR]   (default: build; configure it first)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
clang=${CLANG:-clang++}
[ -f "$build/compile_commands.json" ] || { echo "no $build/compile_commands.json: configure $build first" >&2; exit 2; }
command -v "$clang" >/dev/null || { echo "$clang not found (scripts/setup.sh installs clang)" >&2; exit 2; }
# The folders searched. A source is checked when it, or its header of the
# same name, declares a mutex or a lock annotation (so a new file with a lock
# is never forgotten).
folders="checkpoint backends service"
# In these folders a std::mutex (which the analysis cannot see) is refused
# unless its line says why it cannot be an annotated absl::Mutex (a comment
# with "thread-safety:").
annotated_only="service"
bare=$(grep -rnE 'std::(mutex|lock_guard|unique_lock)' --include='*.h' --include='*.cc' $annotated_only |
       awk '{ code = $0; sub(/^[^:]*:[^:]*:/, "", code); sub(/\/\/.*/, "", code) }
            code ~ /std::(mutex|lock_guard|unique_lock)/ && $0 !~ /thread-safety:/' || true)
if [ -n "$bare" ]; then
  echo "std::mutex outside the analysis (use an annotated absl::Mutex, or say why not with 'thread-safety:'):" >&2
  echo "$bare" >&2
  exit 1
fi
exec python3 - "$build" "$clang" $folders <<'PY'
import json, os, re, shlex, subprocess, sys
build, clang, folders = sys.argv[1], sys.argv[2], sys.argv[3:]
LOCK = re.compile(r"std::(recursive_|shared_|timed_)*mutex\b|absl::Mutex\b|\bSequenceMutex\b|ABSL_GUARDED_BY|"
                  r"ABSL_PT_GUARDED_BY|ABSL_EXCLUSIVE_LOCKS_REQUIRED|ABSL_SHARED_LOCKS_REQUIRED|ABSL_LOCKS_EXCLUDED")

def has_lock(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return LOCK.search(f.read()) is not None
    except FileNotFoundError:
        return False

sources = sorted(os.path.join(root, name)
                 for folder in folders for root, _, names in os.walk(folder) for name in names
                 if name.endswith(".cc") and (has_lock(os.path.join(root, name)) or
                                              has_lock(os.path.join(root, name[:-3] + ".h"))))
if not sources:
    sys.exit("no source with a lock under " + " ".join(folders))
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
