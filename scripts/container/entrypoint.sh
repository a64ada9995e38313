#!/bin/sh
# The container's entrypoint (installed as /usr/local/bin/cairn-entrypoint):
# starts the server with the ports, TLS files and backend families the
# CAIRN_* variables name, so that the health check (cairn-healthcheck, which
# reads the same variables) always asks the port and protocol the server
# serves. Arguments are further server flags (--model=..., --threads=...).
#
#   CAIRN_PORT           gRPC port on 0.0.0.0 (default 50051)
#   CAIRN_METRICS_PORT   Prometheus /metrics port (default 9090; empty: off)
#   CAIRN_HTTP_PORT      the OpenAI-compatible HTTP API's port (default empty:
#                        off); HTTPS with the CAIRN_TLS_* files when set
#   CAIRN_TLS_CERT, CAIRN_TLS_KEY  serve TLS (PEM files); then CAIRN_TLS_CA,
#                        the CA that signed the certificate, is required: the
#                        health check verifies the server with it
#   CAIRN_TLS_CLIENT_CA  require client certificates signed by this CA (the
#                        health check presents CAIRN_TLS_CERT/KEY)
#   CAIRN_BACKENDS       "all" (default): cairn-server, every family linked in;
#                        or a comma-separated list of families (e.g.
#                        "hybrid,recurrent"): cairn-server-core with only
#                        those families' plugins loaded
#   CAIRN_SHUTDOWN_GRACE seconds running calls get to finish after SIGTERM
#                        (--shutdown-grace; the chart sets the pod's
#                        terminationGracePeriodSeconds less a margin); unset:
#                        the server's default (5)
# The binaries are found on PATH (/usr/local/bin in the image).
set -eu

die() {
  echo "cairn-entrypoint: $*" >&2
  exit 2
}

plugin_dir=/usr/local/lib/cairn
families() { ls "$plugin_dir" | sed -n 's/^libcairn_\(.*\)_plugin\.so$/\1/p' | tr '\n' ' '; }
port=${CAIRN_PORT:-50051}
metrics_port=${CAIRN_METRICS_PORT-9090}
http_port=${CAIRN_HTTP_PORT:-}
backends=${CAIRN_BACKENDS:-all}

for arg in "$@"; do
  case $arg in
    --listen=* | --metrics-listen=* | --http-listen=* | --tls-cert=* | --tls-key=* | --tls-client-ca=*)
      die "$arg: the image sets this from CAIRN_PORT, CAIRN_METRICS_PORT, CAIRN_HTTP_PORT and CAIRN_TLS_* (so that its health check follows); set those instead" ;;
    --backend-plugin=*)
      die "$arg: the image loads plugins from CAIRN_BACKENDS (families: $(families))" ;;
    --shutdown-grace=*)
      [ -z "${CAIRN_SHUTDOWN_GRACE:-}" ] || die "$arg: CAIRN_SHUTDOWN_GRACE sets it already" ;;
  esac
done
case $port in '' | *[!0-9]*) die "CAIRN_PORT='$port' is not a port number" ;; esac

flags="--listen=0.0.0.0:$port"
if [ -n "${CAIRN_SHUTDOWN_GRACE:-}" ]; then
  case $CAIRN_SHUTDOWN_GRACE in *[!0-9]*) die "CAIRN_SHUTDOWN_GRACE='$CAIRN_SHUTDOWN_GRACE' is not a number of seconds" ;; esac
  flags="$flags --shutdown-grace=$CAIRN_SHUTDOWN_GRACE"
fi
if [ -n "$metrics_port" ]; then
  case $metrics_port in *[!0-9]*) die "CAIRN_METRICS_PORT='$metrics_port' is not a port number" ;; esac
  flags="$flags --metrics-listen=0.0.0.0:$metrics_port"
fi
if [ -n "$http_port" ]; then
  case $http_port in *[!0-9]*) die "CAIRN_HTTP_PORT='$http_port' is not a port number" ;; esac
  flags="$flags --http-listen=0.0.0.0:$http_port"
fi
if [ -n "${CAIRN_TLS_CERT:-}${CAIRN_TLS_KEY:-}" ]; then
  [ -n "${CAIRN_TLS_CERT:-}" ] && [ -n "${CAIRN_TLS_KEY:-}" ] && [ -n "${CAIRN_TLS_CA:-}" ] ||
    die "TLS needs CAIRN_TLS_CERT, CAIRN_TLS_KEY and CAIRN_TLS_CA (the CA the health check verifies the server with)"
  flags="$flags --tls-cert=$CAIRN_TLS_CERT --tls-key=$CAIRN_TLS_KEY"
  [ -z "${CAIRN_TLS_CLIENT_CA:-}" ] || flags="$flags --tls-client-ca=$CAIRN_TLS_CLIENT_CA"
elif [ -n "${CAIRN_TLS_CLIENT_CA:-}" ]; then
  die "CAIRN_TLS_CLIENT_CA (mutual TLS) needs CAIRN_TLS_CERT, CAIRN_TLS_KEY and CAIRN_TLS_CA"
fi

if [ "$backends" = all ]; then
  # Word splitting of $flags is intended: none of its parts holds a space.
  # shellcheck disable=SC2086
  exec cairn-server $flags "$@"
fi
for family in $(echo "$backends" | tr ',' ' '); do
  plugin="$plugin_dir/libcairn_${family}_plugin.so"
  [ -f "$plugin" ] || die "CAIRN_BACKENDS: no family '$family' in the image (families: $(families))"
  flags="$flags --backend-plugin=$plugin"
done
# shellcheck disable=SC2086
exec cairn-server-core $flags "$@"
