#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds cairn (cairn-server, cairn-cli,
# cairn-load) and starts the server.
#   bash scripts/run.sh                  built-in synthetic models (random weights)
#   bash scripts/run.sh MODEL.gguf [...] serve a GGUF model (name: the file stem)
#   bash scripts/run.sh --listen=0.0.0.0:50051 [...]
# Extra cairn-server flags can follow (or replace) the model; --listen=HOST:PORT
# (or --listen HOST:PORT) replaces the default 127.0.0.1:50051.
# Then, in another terminal: ./build/service/cairn-cli
set -euo pipefail
cd "$(dirname "$0")/.."
# Fast when nothing changed (start-up ~0.1 s): setup.sh is one dpkg-query
# when every package is there, cmake runs only when build/ is not configured
# yet (ninja re-runs it itself when a CMakeLists.txt changes), and ninja is a
# no-op when the binaries are up to date.
bash scripts/setup.sh
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C build -j"$(nproc)" cairn-server cairn-cli cairn-load
args=()
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  args+=("--model=$1")
  shift
fi
listen=(--listen=127.0.0.1:50051)
for a in "$@"; do
  case "$a" in --listen | --listen=*) listen=() ;; esac
done
exec ./build/service/cairn-server "${listen[@]}" "${args[@]}" "$@"
