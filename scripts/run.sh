#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds cairn and runs it.
#   bash scripts/run.sh [MODEL.gguf]
# The gRPC service is not built yet (see README): until it is, this shows what
# cairn reads from a model with `cairn-model info`, by default on the real
# TinyStories model in ../shared/models (or a golden model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$(nproc)" cairn-model
model=${1:-../shared/models/stories260K.gguf}
exec ./build/tools/cairn-model info "$model"
