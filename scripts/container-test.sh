#!/usr/bin/env bash
# Builds the cairn container image and tests it for real with podman:
#   1. installs podman, buildah and mmdebstrap (Debian packages) when missing;
#   2. makes a Debian 12 base image locally (mmdebstrap, then podman import;
#      no image registry is needed), unless it exists;
#   3. builds the Dockerfile on it (buildah, through podman build);
#   4. starts a container with the gRPC port published on 127.0.0.1, waits
#      for its health check (cairn-cli --health inside the container), checks
#      it runs as a non-root user, and streams a Generate through the
#      published port with cairn-cli from the host network;
#   5. when ../shared/models/stories260K.gguf exists, serves it from a
#      read-only mount at /models and streams a story;
#   6. stops and removes the containers.
# Not part of scripts/test.sh (CI): it downloads a Debian base system and
# compiles cairn inside the image build (about 10 minutes on 2 cores).
#
#   bash scripts/container-test.sh           # KEEP_IMAGE=1 keeps the image
# Environment: BASE_IMAGE (default localhost/cairn-base:bookworm),
# IMAGE (default localhost/cairn:test), PORT (default 50071), RUNTIME (the
# OCI runtime, default runc: Debian 12's crun refuses hosts with hybrid
# cgroups, as this one has).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${BASE_IMAGE:-localhost/cairn-base:bookworm}
IMAGE=${IMAGE:-localhost/cairn:test}
PORT=${PORT:-50071}
NAME=cairn-container-test-$$
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

step() { echo "== $*"; }

need=()
RUNTIME=${RUNTIME:-runc}
for p in podman buildah mmdebstrap uidmap slirp4netns fuse-overlayfs "$RUNTIME"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  step "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Podman's default ulimits (1048576 open files) may exceed what the host
# allows; the containers get the host's hard limit of open files instead.
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
LIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=4096:4096")
podman() { command podman --runtime="$RUNTIME" "$@"; }

if podman image exists "$BASE_IMAGE"; then
  step "base image $BASE_IMAGE exists"
else
  step "making the base image $BASE_IMAGE with mmdebstrap (Debian 12, minbase)"
  tar_file=$(mktemp --suffix=.tar)
  log_file=$(mktemp --suffix=.log)
  trap 'rm -f "$tar_file" "$log_file"' EXIT
  # The host's apt sources (deb822 or one-line) are the mirror. Only the
  # files that exist: a missing one must not fail the pipeline (pipefail
  # once ended the script here without a word).
  sources=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sources+=("$f")
  done
  [ ${#sources[@]} -gt 0 ] || { echo "no apt sources in /etc/apt: mmdebstrap needs a mirror" >&2; exit 1; }
  if ! cat "${sources[@]}" | nice mmdebstrap --variant=minbase --include=ca-certificates bookworm "$tar_file" - \
      >"$log_file" 2>&1; then
    echo "mmdebstrap failed; its output:" >&2
    tail -n 40 "$log_file" >&2
    exit 1
  fi
  podman import --quiet "$tar_file" "$BASE_IMAGE" >/dev/null
  rm -f "$tar_file" "$log_file"
fi

step "building $IMAGE (compiles cairn in the build stage)"
start=$(date +%s)
nice podman build --quiet --format docker --runtime "$RUNTIME" "${LIMITS[@]}" --build-arg "BASE=$BASE_IMAGE" -t "$IMAGE" . >/dev/null
echo "built in $(( $(date +%s) - start )) s"
# The build stage's image (compilers, sources) is not needed any more.
podman image prune -f --filter label=cairn.stage=build >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' "$BASE_IMAGE")
echo "image size: $(( size / 1048576 )) MiB (base image $(( base_size / 1048576 )) MiB)"

cleanup() {
  podman rm -f "$NAME" "$NAME-model" >/dev/null 2>&1 || true
  if [ "${KEEP_IMAGE:-}" != "1" ]; then podman rmi -f "$IMAGE" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# The client runs from the same image on the host's network, so the stream
# goes through the port the container publishes.
cli() { podman run --rm "${LIMITS[@]}" --network=host --entrypoint /usr/local/bin/cairn-cli "$IMAGE" "$@"; }

wait_healthy() {
  local name=$1
  for _ in $(seq 1 60); do
    if podman healthcheck run "$name" >/dev/null 2>&1; then return 0; fi
    if [ "$(podman inspect --format '{{.State.Running}}' "$name")" != "true" ]; then
      podman logs "$name" >&2
      echo "container $name stopped" >&2
      return 1
    fi
    sleep 1
  done
  podman logs "$name" >&2
  echo "container $name never became healthy" >&2
  return 1
}

step "starting $NAME (built-in demo models), gRPC published on 127.0.0.1:$PORT"
podman run -d "${LIMITS[@]}" --name "$NAME" -p "127.0.0.1:$PORT:50051" "$IMAGE" --threads=1 >/dev/null
wait_healthy "$NAME"
echo "health check: $(podman inspect --format '{{.State.Healthcheck.Status}}' "$NAME" 2>/dev/null || echo passed)"
uid=$(podman exec "$NAME" id -u)
echo "server runs as uid $uid"
[ "$uid" != "0" ] || { echo "the server runs as root" >&2; exit 1; }

step "streaming a Generate through 127.0.0.1:$PORT"
cli --server=127.0.0.1:$PORT --list-models
out=$(cli --server=127.0.0.1:$PORT --model=demo-chat --chat --temperature=0 --max-tokens=16 --stats \
      "Tell me about a dog." 2>&1)
echo "$out"
grep -q "generated 16 tokens" <<<"$out" || { echo "no 16-token stream" >&2; exit 1; }
podman stop --time 10 "$NAME" >/dev/null
echo "stopped: exit code $(podman inspect --format '{{.State.ExitCode}}' "$NAME")"

shared=${CAIRN_SHARED_DIR:-../shared}
if [ -f "$shared/models/stories260K.gguf" ]; then
  step "serving $shared/models/stories260K.gguf from a read-only mount at /models"
  podman run -d "${LIMITS[@]}" --name "$NAME-model" -p "127.0.0.1:$PORT:50051" \
    -v "$(realpath "$shared/models"):/models:ro" "$IMAGE" --threads=1 \
    --model=stories=/models/stories260K.gguf >/dev/null
  wait_healthy "$NAME-model"
  story=$(cli --server=127.0.0.1:$PORT --model=stories --temperature=0 --max-tokens=24 "Once upon a time")
  echo "$story"
  [ "$(wc -w <<<"$story")" -gt 8 ] || { echo "no story" >&2; exit 1; }
  podman stop --time 10 "$NAME-model" >/dev/null
fi
step "container test passed"
