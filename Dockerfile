# cairn-server in a container: a build stage that compiles cairn, and a slim
# runtime stage with only the shared libraries the binaries need.
#
# No image registry is assumed: BASE is any Debian 12 image, e.g. one made
# locally with mmdebstrap and `podman import` (scripts/container-test.sh
# does both, builds this file and tests the image).
#
#   podman build --format docker --build-arg BASE=localhost/cairn-base:bookworm -t cairn .
#   podman run -p 50051:50051 cairn                      # the built-in demo models
#   podman run -p 50051:50051 -v $PWD/models:/models:ro cairn --model=stories=/models/stories260K.gguf
#   podman run -p 50051:50051 -e CAIRN_BACKENDS=hybrid cairn   # only the hybrid family's plugin
#
# The entrypoint (scripts/container/entrypoint.sh) starts cairn-server, every
# family linked in, or with CAIRN_BACKENDS=family,... cairn-server-core with
# only those families' plugins (/usr/local/lib/cairn). The port (CAIRN_PORT,
# 50051), metrics port (CAIRN_METRICS_PORT, 9090) and TLS files
# (CAIRN_TLS_CERT/KEY/CA, CAIRN_TLS_CLIENT_CA) are variables, not flags, so
# the HEALTHCHECK (scripts/container/healthcheck.sh) asks the port and
# protocol the server serves. Arguments are further server flags.
#
# Paths: models are mounted read-only at /models; /var/lib/cairn (owned by
# the cairn user and group 0, group-writable, so that an arbitrary UID in
# group 0, as OpenShift assigns, may write it too) holds the checkpoint disk
# tier (--checkpoint-disk-dir=/var/lib/cairn/checkpoints) and a session
# directory (--session-dir=/var/lib/cairn/sessions, shared between replicas).
# `--format docker` keeps the HEALTHCHECK (the OCI format has none).
ARG BASE=localhost/cairn-base:bookworm

FROM ${BASE} AS build
ARG CAIRN_NATIVE=OFF
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
      libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev prometheus-cpp-dev libssl-dev nlohmann-json3-dev libcpp-httplib-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY protos protos
COPY backends backends
COPY chat chat
COPY synthetic synthetic
COPY checkpoint checkpoint
COPY service service
COPY tools tools
COPY tests tests
COPY bench bench
# Portable code by default (CAIRN_NATIVE=OFF): the image may run on another CPU.
# Binaries and plugins are found by name, wherever their folder puts them.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAIRN_NATIVE=${CAIRN_NATIVE} >/dev/null \
 && ninja -C /build cairn-server cairn-server-core cairn-cli cairn-load \
      cairn_transformer_plugin cairn_swa_plugin cairn_recurrent_plugin cairn_hybrid_plugin \
 && mkdir -p /out/bin /out/lib/cairn \
 && for exe in cairn-server cairn-server-core cairn-cli cairn-load; do \
      found=$(find /build -type f -name "$exe" -perm -u+x | head -n 1); \
      [ -n "$found" ] || { echo "no $exe in the build" >&2; exit 1; }; \
      cp "$found" /out/bin/; \
    done \
 && find /build/backends -type f -name 'libcairn_*_plugin.so' -exec cp {} /out/lib/cairn/ \; \
 && { [ "$(ls /out/lib/cairn | wc -l)" = 4 ] || { echo "expected 4 family plugins, got: $(ls /out/lib/cairn)" >&2; exit 1; }; } \
 && strip /out/bin/* \
 && strip --strip-unneeded /out/lib/cairn/* \
 && for lib in $(ldd /out/bin/* /out/lib/cairn/* | awk '$3 ~ /^\// {print $3}' | sort -u); do \
      dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" 2>/dev/null \
      || { echo "no package owns $lib" >&2; exit 1; }; \
    done | cut -d: -f1 | sort -u > /out/runtime-packages \
 && cat /out/runtime-packages
# Lets scripts/container-test.sh remove this stage's image after the build.
LABEL cairn.stage=build

FROM ${BASE} AS runtime
COPY --from=build /out/runtime-packages /tmp/runtime-packages
# Only the packages whose shared libraries the binaries and plugins load.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(cat /tmp/runtime-packages) \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/runtime-packages \
 && useradd --uid 10001 --user-group --home-dir /var/lib/cairn --no-create-home --shell /usr/sbin/nologin cairn \
 && mkdir -p /models /var/lib/cairn/checkpoints /var/lib/cairn/sessions \
 && chown -R 10001:0 /var/lib/cairn \
 && chmod -R g=u /var/lib/cairn
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/lib/cairn/ /usr/local/lib/cairn/
COPY scripts/container/entrypoint.sh /usr/local/bin/cairn-entrypoint
COPY scripts/container/healthcheck.sh /usr/local/bin/cairn-healthcheck
USER 10001:10001
WORKDIR /var/lib/cairn
# PATH stated: the entrypoint finds the binaries on it, and an imported base
# image carries no environment.
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CAIRN_PORT=50051 CAIRN_METRICS_PORT=9090 CAIRN_BACKENDS=all
EXPOSE 50051 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/cairn-healthcheck"]
# Arguments given to `run` are server flags after the entrypoint's own.
ENTRYPOINT ["/usr/local/bin/cairn-entrypoint"]
CMD []
