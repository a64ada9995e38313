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
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
