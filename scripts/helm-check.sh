#!/usr/bin/env bash
# Checks the Helm chart helm/cairn offline (helm itself is not installable
# from Debian's packages):
#   1. renders it with helm/check/render (Go's text/template, Helm's engine,
#      with sprig and Helm's own functions) for the default values and every
#      file in helm/check/values/;
#   2. checks each rendering with helm/check/check_manifests.py (fields
#      against the Kubernetes API models of python3-kubernetes, references
#      between objects, the Envoy configuration), yamllint, and
#      `kubectl label --local` (kubectl decodes every object, no cluster);
#   3. expects every file in helm/check/invalid/ to fail with the message its
#      first line names.
# Not part of scripts/test.sh (CI): it installs a Go toolchain.
#   bash scripts/helm-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=()
for p in golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev python3-kubernetes python3-yaml yamllint; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd helm/check/render && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$work/cache" go build -o "$work/render" .)
chart=helm/cairn
yamllint -d '{extends: relaxed, rules: {line-length: disable}}' "$chart/Chart.yaml" "$chart/values.yaml" helm/check/values

failed=0
for values in default helm/check/values/*.yaml; do
  args=()
  [ "$values" = default ] || args=(-f "$values")
  out="$work/$(basename "$values" .yaml).yaml"
  echo "== $values"
  "$work/render" "${args[@]}" "$chart" >"$out" 2>"$work/notes"
  extra=()
  secret=$(python3 -c 'import sys, yaml; v = yaml.safe_load(open(sys.argv[1])) if sys.argv[1] != "default" else {}; print(((v or {}).get("tls") or {}).get("existingSecret", ""))' "$values")
  [ -n "$secret" ] && extra=(--existing-secret "$secret")
  /usr/bin/python3 helm/check/check_manifests.py "$out" "${extra[@]}" || failed=1
  yamllint -d '{extends: relaxed, rules: {line-length: disable, comments-indentation: disable}}' "$out" || failed=1
  if command -v kubectl >/dev/null; then
    n=$(KUBECONFIG=/dev/null kubectl label --local -f "$out" -o name checked=yes | wc -l)
    echo "kubectl decoded $n objects"
  fi
done
for values in helm/check/invalid/*.yaml; do
  want=$(sed -n '1s/^# expect: //p' "$values")
  if "$work/render" -f "$values" "$chart" >/dev/null 2>"$work/err"; then
    echo "$values: rendered, but should fail with '$want'"; failed=1
  elif ! grep -qF "$want" "$work/err"; then
    echo "$values: failed with '$(cat "$work/err")', not '$want'"; failed=1
  else
    echo "$values: refused as expected ($want)"
  fi
done
[ $failed = 0 ] && echo "== chart checks passed" || { echo "== chart checks FAILED"; exit 1; }
