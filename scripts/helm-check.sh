#!/usr/bin/env bash
# Checks the Helm chart helm/cairn offline (helm is not a Debian package):
#   1. tests and builds helm/check/render, which renders a chart as Helm 3's
#      engine does (values through sigs.k8s.io/yaml, Debian's
#      golang-k8s-sigs-yaml-dev, Helm's library: numbers are float64) and
#      fails with "cannot follow Helm here" where it cannot;
#   2. renders the chart for every file in helm/check/values/ and checks
#      each rendering:
#      - every object against its published schema (Kubernetes, Gateway
#        API, Envoy Gateway, Prometheus operator, KEDA; npm's
#        kubernetes-models packages pinned in helm/check/schemas/package.json)
#        with helm/check/schemas/validate.mjs, unknown fields included;
#      - the objects together with helm/check/check_manifests.py
#        (references, TLS and appProtocol, BackendTLSPolicy, Pod Security
#        "restricted", floats printed by Go, metric names the server
#        exports, Envoy's configuration), yamllint, `kubectl label --local`
#        when kubectl is installed;
#   3. expects every file in helm/check/invalid/ to be refused at render time
#      with the message its first line names (the default values too: the
#      image must name a registry), and every file of rendered manifests in
#      helm/check/rejected/ (defects the chart once shipped) to be refused
#      by the checks with every message its "# expect:" lines name;
#   4. checks that the README's first-day values are helm/check/values/first-day.yaml
#      and validates the manifests its first day applies (the model volume).
# Not part of scripts/test.sh (CI): it installs Go and npm packages.
#   bash scripts/helm-check.sh
# Environment: CAIRN_HELM_CHECK_CACHE (default ~/.cache/cairn-helm-check)
# keeps the npm packages between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=()
for p in golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev python3-yaml yamllint; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gobuild() { (cd helm/check/render && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$work/cache" go "$@"); }
echo "== helm/check/render: go vet, go test"
gobuild vet .
gobuild test -count=1 . | tail -n 1
gobuild build -o "$work/render" .

# The schemas: npm packages at the versions package.json pins, installed
# once per package.json (no lock file: it would name the registry's host).
cache=${CAIRN_HELM_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn-helm-check}
schemas="$cache/$(sha256sum helm/check/schemas/package.json | cut -c1-16)"
if [ ! -d "$schemas/node_modules" ]; then
  echo "== installing the schema packages into $schemas"
  mkdir -p "$schemas"
  cp helm/check/schemas/package.json "$schemas/"
  (cd "$schemas" && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)
fi
modules="$schemas/node_modules"
metrics_source=$(grep -rl --include='*.cc' '"cairn_requests_ok_total"' service | head -n 1)
[ -n "$metrics_source" ] || { echo "no source file in service/ names the server's metrics" >&2; exit 1; }

chart=helm/cairn
yamllint -d '{extends: relaxed, rules: {line-length: disable}}' "$chart/Chart.yaml" "$chart/values.yaml" helm/check/values
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$chart/dashboards/cairn.json"

failed=0
sets=0
objects=0
for values in helm/check/values/*.yaml; do
  base="$work/$(basename "$values" .yaml)"
  echo "== $values"
  if ! "$work/render" -f "$values" -json "$base.json" "$chart" >"$base.yaml" 2>"$work/notes"; then
    cat "$work/notes"; failed=1; continue
  fi
  sets=$((sets + 1))
  objects=$((objects + $(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$base.json")))
  node helm/check/schemas/validate.mjs --modules "$modules" "$base.json" || failed=1
  python3 helm/check/check_manifests.py "$base.json" --yaml "$base.yaml" --values "$values" \
    --metrics-source "$metrics_source" || failed=1
  # toYaml (Helm's) writes lists unindented under their key.
  yamllint -d '{extends: relaxed, rules: {line-length: disable, comments-indentation: disable, indentation: {indent-sequences: whatever}}}' "$base.yaml" || failed=1
  if command -v kubectl >/dev/null; then
    n=$(KUBECONFIG=/dev/null kubectl label --local -f "$base.yaml" -o name checked=yes | wc -l) || failed=1
    echo "kubectl decoded $n objects"
  fi
done

refused=0
for values in helm/check/invalid/*.yaml; do
  want=$(sed -n '1s/^# expect: //p' "$values")
  if "$work/render" -f "$values" "$chart" >/dev/null 2>"$work/err"; then
    echo "$values: rendered, but should fail with '$want'"; failed=1
  elif ! grep -qF "$want" "$work/err"; then
    echo "$values: failed with '$(cat "$work/err")', not '$want'"; failed=1
  else
    echo "$values: refused as expected ($want)"; refused=$((refused + 1))
  fi
done
for manifests in helm/check/rejected/*.yaml; do
  out="$work/rejected.out"
  status=0
  { "$work/render" -decode "$manifests" -json "$work/rejected.json" &&
    node helm/check/schemas/validate.mjs --modules "$modules" "$work/rejected.json"; } >"$out" 2>&1 || status=1
  python3 helm/check/check_manifests.py "$work/rejected.json" --yaml "$manifests" \
    --metrics-source "$metrics_source" >>"$out" 2>&1 || status=1
  missing=0
  while read -r want; do
    grep -qF "$want" "$out" || { echo "$manifests: not refused with '$want':"; cat "$out"; missing=1; }
  done < <(sed -n 's/^# expect: //p' "$manifests")
  if [ $status = 0 ] || [ $missing = 1 ]; then
    echo "$manifests: passed the checks, but must be refused"; failed=1
  else
    echo "$manifests: refused as expected ($(sed -n 's/^# expect: //p' "$manifests" | paste -sd ';'))"
    refused=$((refused + 1))
  fi
done

# The README shows the first day's values file; it must be the one checked here.
python3 - README.md helm/check/values/first-day.yaml <<'PY' || failed=1
import sys, textwrap
readme, values = open(sys.argv[1]).read(), open(sys.argv[2]).read()
start, end = readme.find("<!-- first-day-values -->\n"), readme.find("<!-- end first-day-values -->")
shown = textwrap.dedent(readme[start:end].split("\n", 1)[1]).strip("\n") + "\n" if 0 <= start < end else ""
if shown != values:
    sys.exit("README.md's first-day values (between <!-- first-day-values --> and <!-- end first-day-values -->) "
             "differ from " + sys.argv[2])
PY

# ... and the manifests it applies to fill the model volume must be valid.
python3 - README.md "$work/first-day-fill.yaml" <<'PY' || failed=1
import sys, textwrap
readme = open(sys.argv[1]).read()
start = readme.find("kubectl apply -f - <<'EOF'\n")
end = readme.find("EOF\n", start + 30)
if start < 0 or end < 0:
    sys.exit("README.md: no first-day kubectl apply block")
open(sys.argv[2], "w").write(textwrap.dedent(readme[start:end].split("\n", 1)[1].rstrip(" ")))
PY
"$work/render" -decode "$work/first-day-fill.yaml" -json "$work/first-day-fill.json" &&
  node helm/check/schemas/validate.mjs --modules "$modules" "$work/first-day-fill.json" | sed 's|^.*first-day-fill.json|README first day (model volume)|' ||
  failed=1

if [ $failed = 0 ]; then
  echo "== chart checks passed: $sets value sets, $objects objects validated against their schemas, $refused refusals as expected"
else
  echo "== chart checks FAILED"; exit 1
fi
