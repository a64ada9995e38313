#!/usr/bin/env bash
# Installs every Debian package cairn needs to build, test, fuzz and serve.
# Idempotent: when everything is already present it prints nothing and exits 0.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc
  libprotobuf-dev protobuf-compiler libabsl-dev
  libopenblas-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang libclang-rt-14-dev clang-format
  prometheus-cpp-dev libssl-dev openssl
  nlohmann-json3-dev libcpp-httplib-dev
  python3 python3-grpcio python3-protobuf
  nginx
)

# One dpkg-query for all packages: scripts/run.sh calls this on every start,
# and a query per package cost about half a second.
declare -A installed=()
while read -r name want error state; do
  if [ "$want $error $state" = "install ok installed" ]; then installed[$name]=1; fi
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
missing=()
for p in "${PACKAGES[@]}"; do
  [ -n "${installed[$p]:-}" ] || missing+=("$p")
done
# Node.js for the openai SDK test (tests/service/http): Debian's nodejs and
# npm, unless a node with its npm is already there (nodesource's nodejs
# bundles npm and conflicts with Debian's npm package).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The openai SDK at the version tests/service/http/package-lock.json pins
# (npm's registry), once.
sdk_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/service/http"
if [ ! -f "$sdk_dir/node_modules/openai/package.json" ]; then
  echo "setup: npm ci in tests/service/http (the openai SDK)" >&2
  (cd "$sdk_dir" && npm ci --no-audit --no-fund --silent >/dev/null)
fi
