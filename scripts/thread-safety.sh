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
# The sources whose classes carry the annotations (headers come with them).
sources="checkpoint/store.cc checkpoint/prefix_index.cc checkpoint/engine.cc
service/sessions/sessions.cc service/sessions/session_dir.cc service/host/memory_budget.cc service/scheduling/scheduler.cc
service/server.cc service/api/generate_call.cc service/api/worker_pool.cc service/scheduling/generate_job.cc
service/scheduling/fair_backend.cc service/api/inference_service.cc"
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
