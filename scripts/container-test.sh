#!/usr/bin/env bash
# Builds the cairn container image and tests it for real with podman:
#   1. installs podman, buildah, mmdebstrap and Debian's docker-registry when
#      missing;
#   2. makes a Debian 12 base image locally (mmdebstrap, then podman import;
#      no image registry is needed), unless it exists;
#   3. builds the Dockerfile on it (buildah, through podman build), timing it
#      and printing the image's size and contents;
#   4. checks the entrypoint refuses flags it owns (--listen, --tls-*) and an
#      unknown family;
#   5. default image (every family linked in): waits for its HEALTHCHECK,
#      checks it runs as a non-root user, streams a Generate through the
#      published port with cairn-cli from the host network;
#   6. only the hybrid family (CAIRN_BACKENDS=hybrid: cairn-server-core with
#      the hybrid plugin alone): serves the golden granitehybrid GGUF from
#      ../shared mounted read-only (demo-hybrid without ../shared) and refuses
#      a recurrent model;
#   7. another port and TLS (CAIRN_PORT, CAIRN_TLS_*, a CA and certificate
#      made with openssl): the HEALTHCHECK must pass, so it follows both, and
#      a TLS client streams; metrics answer on CAIRN_METRICS_PORT;
#   8. serves ../shared/models/stories260K.gguf from a read-only mount;
#   9. the README's first day, as far as it runs here: pushes the image to a
#      registry (Debian's docker-registry on 127.0.0.1), pulls it back, and
#      sends the first request with the pulled image's cairn-cli;
#  10. stops and removes the containers; prints every request it made.
# Not part of scripts/test.sh (CI): it downloads a Debian base system and
# compiles cairn inside the image build (10 to 30 minutes on 2 cores).
#
#   bash scripts/container-test.sh    # KEEP_IMAGE=1 keeps the image and the build stage (a cache)
# Environment: BASE_IMAGE (default localhost/cairn-base:bookworm),
# IMAGE (default localhost/cairn:test), PORT (default 50071), RUNTIME (the
# OCI runtime, default runc: Debian 12's crun refuses hosts with hybrid
# cgroups, as this one has), CAIRN_SHARED_DIR (default ../shared).
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
for p in podman buildah mmdebstrap uidmap slirp4netns fuse-overlayfs docker-registry openssl "$RUNTIME"; do
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
# The script runs the HEALTHCHECK itself (podman healthcheck run), so no
# timer is wanted; on hosts without systemd podman 4.3 still prints "unable to
# get systemd connection" lines for it, which are harmless.
DETACHED=(-d --health-interval=disable "${LIMITS[@]}")
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
build_seconds=$(( $(date +%s) - start ))
echo "built in $build_seconds s"
# The build stage's image (compilers, sources) is not needed any more; with
# KEEP_IMAGE=1 it stays, as the cache of the next build.
if [ "${KEEP_IMAGE:-}" != "1" ]; then
  podman image prune -f --filter label=cairn.stage=build >/dev/null
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' "$BASE_IMAGE")
echo "image size: $(( size / 1048576 )) MiB (base image $(( base_size / 1048576 )) MiB)"
podman run --rm --no-healthcheck "${LIMITS[@]}" --entrypoint /bin/sh "$IMAGE" -c \
  'cd /usr/local && ls -l bin/cairn-* lib/cairn/*.so | awk "{print \$5, \$9}"'
shared=${CAIRN_SHARED_DIR:-../shared}
tls_dir=$(mktemp -d)
registry_dir=$(mktemp -d)
registry_pid=""
cleanup() {
  podman rm -f "$NAME" "$NAME-hybrid" "$NAME-tls" "$NAME-model" "$NAME-pulled" >/dev/null 2>&1 || true
  [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
  [ -z "${pushed:-}" ] || podman rmi -f "$pushed" >/dev/null 2>&1 || true
  rm -rf "$tls_dir" "$registry_dir" "$tls_dir.requests"
  if [ "${KEEP_IMAGE:-}" != "1" ]; then podman rmi -f "$IMAGE" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# Every request this script sends to a server in a container, for the
# summary (a file: most requests run in a command substitution's subshell).
requests_log="$tls_dir.requests"
: >"$requests_log"
request() { echo "$*" >>"$requests_log"; }
# The client runs from the same image on the host's network, so the stream
# goes through the port the container publishes. Extra podman flags come
# before "--".
cli() {
  local flags=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  request "cairn-cli $*"
  podman run --rm --no-healthcheck "${LIMITS[@]}" --network=host "${flags[@]}" \
    --entrypoint /usr/local/bin/cairn-cli "$IMAGE" "$@"
}

wait_healthy() {
  local name=$1
  for _ in $(seq 1 60); do
    if podman healthcheck run "$name" >/dev/null 2>&1; then
      request "HEALTHCHECK of $name (cairn-healthcheck in the container)"
      return 0
    fi
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

expect_refusal() {  # expect_refusal MESSAGE podman-run-arguments...
  local want=$1 out
  shift
  if out=$(podman run --rm --no-healthcheck "${LIMITS[@]}" "$@" 2>&1); then
    echo "the container started, but should refuse: $*" >&2; exit 1
  fi
  grep -qF "$want" <<<"$out" || { echo "refused with '$out', not '$want'" >&2; exit 1; }
  echo "refused as expected: $want"
}

step "the entrypoint refuses what it sets itself"
expect_refusal "set those instead" "$IMAGE" --listen=0.0.0.0:1
expect_refusal "no family 'nope' in the image (families: hybrid recurrent swa transformer" \
  -e CAIRN_BACKENDS=hybrid,nope "$IMAGE"
expect_refusal "TLS needs CAIRN_TLS_CERT, CAIRN_TLS_KEY and CAIRN_TLS_CA" -e CAIRN_TLS_CERT=/x "$IMAGE"

step "starting $NAME (every family linked in, built-in demo models), gRPC published on 127.0.0.1:$PORT"
podman run "${DETACHED[@]}" --name "$NAME" -p "127.0.0.1:$PORT:50051" "$IMAGE" --threads=1 >/dev/null
wait_healthy "$NAME"
uid=$(podman exec "$NAME" id -u)
echo "server runs as uid $uid: $(podman exec "$NAME" cat /proc/1/cmdline | tr '\0' ' ')"
[ "$uid" != "0" ] || { echo "the server runs as root" >&2; exit 1; }
step "streaming a Generate through 127.0.0.1:$PORT"
cli -- --server=127.0.0.1:$PORT --list-models
out=$(cli -- --server=127.0.0.1:$PORT --model=demo-chat --chat --temperature=0 --max-tokens=16 --stats \
      "Tell me about a dog." 2>&1)
echo "$out"
grep -q "generated 16 tokens" <<<"$out" || { echo "no 16-token stream" >&2; exit 1; }
podman stop --time 10 "$NAME" >/dev/null
echo "stopped: exit code $(podman inspect --format '{{.State.ExitCode}}' "$NAME")"

step "only the hybrid family: CAIRN_BACKENDS=hybrid"
hybrid_args=(--threads=1 --model=demo-hybrid=demo-hybrid)
mounts=()
golden="$shared/golden/models"
if [ -f "$golden/granitehybrid.gguf" ]; then
  mounts=(-v "$(realpath "$golden"):/models:ro")
  hybrid_args+=(--model=granite=/models/granitehybrid.gguf)
else
  echo "no $golden/granitehybrid.gguf: the built-in demo-hybrid only"
fi
podman run "${DETACHED[@]}" --name "$NAME-hybrid" -p "127.0.0.1:$PORT:50051" -e CAIRN_BACKENDS=hybrid \
  "${mounts[@]}" "$IMAGE" "${hybrid_args[@]}" >/dev/null
wait_healthy "$NAME-hybrid"
cmdline=$(podman exec "$NAME-hybrid" cat /proc/1/cmdline | tr '\0' ' ')
echo "server: $cmdline"
# The entrypoint runs the binary by name from PATH: what runs is /proc/1/exe.
exe=$(podman exec "$NAME-hybrid" readlink /proc/1/exe)
[ "$exe" = /usr/local/bin/cairn-server-core ] &&
  grep -q "^\(/usr/local/bin/\)\?cairn-server-core .*--backend-plugin=/usr/local/lib/cairn/libcairn_hybrid_plugin.so" <<<"$cmdline" ||
  { echo "not cairn-server-core with the hybrid plugin (runs $exe)" >&2; exit 1; }
[ "$(grep -o -- --backend-plugin= <<<"$cmdline" | wc -l)" = 1 ] || { echo "more than one plugin loaded" >&2; exit 1; }
models=$(cli -- --server=127.0.0.1:$PORT --list-models)
echo "$models"
for m in "${hybrid_args[@]}"; do
  case $m in --model=*) name=${m#--model=}; grep -q "^${name%%=*}\b" <<<"$models" || { echo "${name%%=*} not served" >&2; exit 1; } ;; esac
done
model=$(grep -q "^granite\b" <<<"$models" && echo granite || echo demo-hybrid)
out=$(cli -- --server=127.0.0.1:$PORT --model=$model --temperature=0 --max-tokens=8 --stats "Once upon a time" 2>&1)
echo "$out"
# Random weights may end the reply early (an end-of-text token): any stream counts.
grep -Eq "generated [1-9][0-9]* tokens" <<<"$out" || { echo "no stream from $model" >&2; exit 1; }
podman stop --time 10 "$NAME-hybrid" >/dev/null
if [ -f "$golden/mamba2.gguf" ]; then
  expect_refusal "no backend family serves architecture 'mamba2'" -e CAIRN_BACKENDS=hybrid "${mounts[@]}" "$IMAGE" --model=m=/models/mamba2.gguf
fi

step "another port and TLS: the HEALTHCHECK must follow CAIRN_PORT and CAIRN_TLS_*"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cairn-test-ca -keyout "$tls_dir/ca.key" \
  -out "$tls_dir/ca.crt" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$tls_dir/tls.key" -out "$tls_dir/tls.csr" >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost\n' >"$tls_dir/ext"
openssl x509 -req -in "$tls_dir/tls.csr" -CA "$tls_dir/ca.crt" -CAkey "$tls_dir/ca.key" -CAcreateserial -days 2 \
  -extfile "$tls_dir/ext" -out "$tls_dir/tls.crt" >/dev/null 2>&1
chmod 0755 "$tls_dir"
chmod 0644 "$tls_dir"/*
mport=$((PORT + 1))
podman run "${DETACHED[@]}" --name "$NAME-tls" -p "127.0.0.1:$PORT:6443" -p "127.0.0.1:$mport:9464" \
  -v "$tls_dir:/etc/cairn/tls:ro" -e CAIRN_PORT=6443 -e CAIRN_METRICS_PORT=9464 \
  -e CAIRN_TLS_CERT=/etc/cairn/tls/tls.crt -e CAIRN_TLS_KEY=/etc/cairn/tls/tls.key -e CAIRN_TLS_CA=/etc/cairn/tls/ca.crt \
  "$IMAGE" --threads=1 --model=demo-hybrid=demo-hybrid >/dev/null
wait_healthy "$NAME-tls"
echo "health check passed on port 6443 over TLS"
out=$(cli -v "$tls_dir:/tls:ro" -- --server=127.0.0.1:$PORT --tls-ca=/tls/ca.crt --tls-server-name=localhost \
      --temperature=0 --max-tokens=8 --stats "hello" 2>&1)
echo "$out"
grep -Eq "generated [1-9][0-9]* tokens" <<<"$out" || { echo "no stream over TLS" >&2; exit 1; }
if cli -- --server=127.0.0.1:$PORT --health --timeout=2 >/dev/null 2>&1; then
  echo "a plaintext client was answered by the TLS port" >&2; exit 1
fi
request "GET http://127.0.0.1:$mport/metrics"
metrics=$(curl -fsS "http://127.0.0.1:$mport/metrics")
grep "^cairn_requests_total" <<<"$metrics" || { echo "no metrics on CAIRN_METRICS_PORT" >&2; exit 1; }
podman stop --time 10 "$NAME-tls" >/dev/null

if [ -f "$shared/models/stories260K.gguf" ]; then
  step "serving $shared/models/stories260K.gguf from a read-only mount at /models"
  podman run "${DETACHED[@]}" --name "$NAME-model" -p "127.0.0.1:$PORT:50051" \
    -v "$(realpath "$shared/models"):/models:ro" "$IMAGE" --threads=1 \
    --model=stories=/models/stories260K.gguf >/dev/null
  wait_healthy "$NAME-model"
  story=$(cli -- --server=127.0.0.1:$PORT --model=stories --temperature=0 --max-tokens=24 "Once upon a time")
  echo "$story"
  [ "$(wc -w <<<"$story")" -gt 8 ] || { echo "no story" >&2; exit 1; }
  podman stop --time 10 "$NAME-model" >/dev/null
fi

step "first day: push to a registry, pull, first request with the pulled image's cairn-cli"
rport=$((PORT + 2))
cat >"$registry_dir/config.yml" <<YAML
version: 0.1
storage:
  filesystem:
    rootdirectory: $registry_dir/data
http:
  addr: 127.0.0.1:$rport
YAML
docker-registry serve "$registry_dir/config.yml" >"$registry_dir/log" 2>&1 &
registry_pid=$!
for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$rport/v2/" >/dev/null && break; sleep 0.2; done
pushed="127.0.0.1:$rport/team/cairn:0.1.0"
podman tag "$IMAGE" "$pushed"
podman push --quiet --tls-verify=false "$pushed"
podman rmi "$pushed" >/dev/null
podman pull --quiet --tls-verify=false "$pushed" >/dev/null
echo "pushed and pulled $pushed ($(curl -fsS "http://127.0.0.1:$rport/v2/team/cairn/tags/list"))"
podman run "${DETACHED[@]}" --name "$NAME-pulled" -p "127.0.0.1:$PORT:50051" "$pushed" --threads=1 >/dev/null
wait_healthy "$NAME-pulled"
request "cairn-cli --server=127.0.0.1:$PORT --model=demo-chat --chat ... Hello (the pulled image's)"
first=$(podman run --rm --no-healthcheck "${LIMITS[@]}" --network=host --entrypoint cairn-cli "$pushed" \
        --server=127.0.0.1:$PORT --model=demo-chat --chat --temperature=0 --max-tokens=8 "Hello")
echo "$first"
[ -n "$first" ] || { echo "no first reply" >&2; exit 1; }
podman stop --time 10 "$NAME-pulled" >/dev/null

step "container test passed"
echo "figures: build $build_seconds s, image $(( size / 1048576 )) MiB (base $(( base_size / 1048576 )) MiB)"
echo "requests made ($(wc -l <"$requests_log")):"
sed 's/^/  /' "$requests_log"
