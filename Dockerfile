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
#
# Paths: models are mounted read-only at /models; /var/lib/cairn (owned by
# the cairn user) holds the checkpoint disk tier (--checkpoint-disk-dir=
# /var/lib/cairn/checkpoints) and a session directory (--session-dir=
# /var/lib/cairn/sessions, shared between replicas). Ports: 50051 gRPC,
# 9090 Prometheus /metrics. `--format docker` keeps the HEALTHCHECK (the OCI
# format has none).
ARG BASE=localhost/cairn-base:bookworm

FROM ${BASE} AS build
ARG CAIRN_NATIVE=OFF
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
      libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev prometheus-cpp-dev libssl-dev nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY protos protos
COPY backends backends
COPY chat chat
COPY checkpoint checkpoint
COPY service service
COPY tools tools
COPY tests tests
COPY bench bench
# Portable code by default (CAIRN_NATIVE=OFF): the image may run on another CPU.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAIRN_NATIVE=${CAIRN_NATIVE} >/dev/null \
 && ninja -C /build cairn-server cairn-cli cairn-load \
 && mkdir -p /out/bin \
 && cp /build/service/cairn-server /build/service/cairn-cli /build/service/cairn-load /out/bin/ \
 && strip /out/bin/* \
 && for lib in $(ldd /out/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u); do \
      dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" 2>/dev/null \
      || { echo "no package owns $lib" >&2; exit 1; }; \
    done | cut -d: -f1 | sort -u > /out/runtime-packages \
 && cat /out/runtime-packages
# Lets scripts/container-test.sh remove this stage's image after the build.
LABEL cairn.stage=build

FROM ${BASE} AS runtime
COPY --from=build /out/runtime-packages /tmp/runtime-packages
# Only the packages whose shared libraries the binaries load.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(cat /tmp/runtime-packages) \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/runtime-packages \
 && useradd --uid 10001 --user-group --home-dir /var/lib/cairn --no-create-home --shell /usr/sbin/nologin cairn \
 && mkdir -p /models /var/lib/cairn/checkpoints /var/lib/cairn/sessions \
 && chown -R cairn:cairn /var/lib/cairn
COPY --from=build /out/bin/ /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/cairn
EXPOSE 50051 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/cairn-cli", "--server=127.0.0.1:50051", "--health=cairn.v1.Inference"]
# Arguments given to `run` follow these (a later flag wins over an earlier one).
ENTRYPOINT ["/usr/local/bin/cairn-server", "--listen=0.0.0.0:50051", "--metrics-listen=0.0.0.0:9090"]
CMD []
