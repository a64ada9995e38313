#!/bin/sh
# The container's health check (installed as /usr/local/bin/cairn-healthcheck):
# asks the server's grpc.health.v1 service on the port and with the TLS
# settings of the CAIRN_* variables that cairn-entrypoint started it with.
#
#   cairn-healthcheck [SERVICE]
#
# SERVICE defaults to cairn.v1.Inference (SERVING once the models are
# loaded); "" asks for the server as a whole (liveness). Exits 0 when SERVING.
# CAIRN_TLS_SERVER_NAME is the name the certificate must carry (default
# localhost); CAIRN_HEALTH_TIMEOUT the seconds to wait (default 3).
set -eu
service=${1-cairn.v1.Inference}
set -- "--server=127.0.0.1:${CAIRN_PORT:-50051}" "--health=$service" "--timeout=${CAIRN_HEALTH_TIMEOUT:-3}"
if [ -n "${CAIRN_TLS_CERT:-}" ]; then
  set -- "$@" "--tls-ca=${CAIRN_TLS_CA:-}" "--tls-server-name=${CAIRN_TLS_SERVER_NAME:-localhost}"
  if [ -n "${CAIRN_TLS_CLIENT_CA:-}" ]; then
    set -- "$@" "--tls-cert=$CAIRN_TLS_CERT" "--tls-key=$CAIRN_TLS_KEY"
  fi
fi
exec /usr/local/bin/cairn-cli "$@"
