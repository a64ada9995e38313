#!/usr/bin/python3
"""Checks what the schemas cannot in manifests rendered from helm/cairn.

The schemas (helm/check/schemas/validate.mjs) judge each object alone; this
judges the objects together and against what the image and server do:
- names are DNS-1123;
- references resolve: selectors select the pod templates, the StatefulSet's
  serviceName is a headless Service, mounts name volumes, Services' target
  ports name container ports, Secret/ConfigMap/claim volumes name rendered
  objects (or ones the values file says exist), --replica-name comes from
  POD_NAME, the ServiceMonitor and the autoscaler find their targets;
- TLS: a port whose pods serve TLS (CAIRN_TLS_CERT) is not declared
  kubernetes.io/h2c (cleartext HTTP/2), and a GRPCRoute to it has a
  BackendTLSPolicy with the certificate's name, or the Gateway would speak
  plaintext to a TLS port;
- Pod Security "restricted": non-root, RuntimeDefault seccomp, no privilege
  escalation, all capabilities dropped; no API token mounted;
- no number printed as a Go float (2.592e+06): values are float64 in Helm;
- alerts, the dashboard and the autoscalers use metric names the server
  exports (read from its metrics source file);
- Envoy's configuration hashes on the affinity header with RING_HASH over
  the headless Service.

  check_manifests.py RENDERED.json --yaml RENDERED.yaml --metrics-source FILE
                     [--values VALUES.yaml] [--header x-cairn-session]
Exits 1 listing every problem.
"""
import argparse
import json
import re
import sys

import yaml

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
GO_FLOAT = re.compile(r"(?<![\w.])\d+(\.\d+)?e[+-]\d+(?![\w.])")
METRIC = re.compile(r"\bcairn_[a-z0-9_]+")
SERVER_ERRORS = "INTERNAL|UNKNOWN|UNAVAILABLE|DATA_LOSS|DEADLINE_EXCEEDED"

problems = []


def problem(where, msg):
    problems.append("%s: %s" % (where, msg))


def name_of(d):
    return "%s/%s" % (d.get("kind"), (d.get("metadata") or {}).get("name"))


def pod_owners(docs):
    for d in docs:
        if d["kind"] in ("StatefulSet", "Deployment"):
            yield d, d["spec"]["template"]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def env_value(container, name):
    for e in container.get("env", []):
        if e["name"] == name:
            return e.get("value")
    return None


def serves_tls(container):
    return env_value(container, "CAIRN_TLS_CERT") is not None or \
        any(a.startswith("--tls-cert=") for a in container.get("args", []))


def check_pod_references(owner, tmpl, ctx):
    where = name_of(owner)
    if not selects(owner["spec"]["selector"].get("matchLabels"), tmpl["metadata"].get("labels", {})):
        problem(where, "selector does not select its pod template")
    spec = tmpl["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    claim_templates = {t["metadata"]["name"] for t in owner["spec"].get("volumeClaimTemplates", [])}
    for v in volumes.values():
        if "secret" in v and v["secret"]["secretName"] not in ctx["secrets"]:
            problem(where, "volume %s: Secret %s is neither rendered nor given" % (v["name"], v["secret"]["secretName"]))
        if "configMap" in v and v["configMap"]["name"] not in set(ctx["configmaps"]) | ctx["given_configmaps"]:
            problem(where, "volume %s: ConfigMap %s is not rendered" % (v["name"], v["configMap"]["name"]))
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        if claim and claim not in ctx["claims"]:
            problem(where, "volume %s: claim %s is neither rendered nor given" % (v["name"], claim))
    for c in spec["containers"]:
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes and m["name"] not in claim_templates:
                problem(where, "mount %s names no volume" % m["name"])
        if any("$(POD_NAME)" in a for a in c.get("args", [])) and env_value(c, "POD_NAME") is None and \
                not any(e["name"] == "POD_NAME" for e in c.get("env", [])):
            problem(where, "$(POD_NAME) without a POD_NAME variable")
    if owner["kind"] == "StatefulSet":
        svc = ctx["services"].get(owner["spec"]["serviceName"])
        if svc is None or svc["spec"].get("clusterIP") != "None":
            problem(where, "serviceName %s is not a headless Service" % owner["spec"]["serviceName"])
        if "--replica-name=$(POD_NAME)" not in spec["containers"][0].get("args", []):
            problem(where, "replicas are not named after their pods")


def check_restricted(owner, tmpl):
    """Pod Security Standards, "restricted" profile (the parts a chart sets)."""
    where = name_of(owner)
    spec = tmpl["spec"]
    pod_sc = spec.get("securityContext") or {}
    if spec.get("automountServiceAccountToken") is not False:
        problem(where, "mounts a service account token (automountServiceAccountToken is not false)")
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c.get("securityContext") or {}
        cw = "%s container %s" % (where, c["name"])
        if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True):
            problem(cw, "restricted: runAsNonRoot is not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            problem(cw, "restricted: runs as UID 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problem(cw, "restricted: seccompProfile is not RuntimeDefault or Localhost")
        if sc.get("allowPrivilegeEscalation") is not False:
            problem(cw, "restricted: allowPrivilegeEscalation is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problem(cw, "restricted: capabilities do not drop ALL")
        if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            problem(cw, "restricted: adds capabilities")
        if sc.get("privileged"):
            problem(cw, "restricted: privileged")
    for v in spec.get("volumes", []):
        if "hostPath" in v:
            problem(where, "restricted: hostPath volume %s" % v["name"])


def service_pods(svc, docs):
    return [t for _, t in pod_owners(docs) if selects(svc["spec"].get("selector"), t["metadata"].get("labels", {}))]


def check_services(ctx, docs):
    for name, svc in ctx["services"].items():
        pods = service_pods(svc, docs)
        if not pods:
            problem("Service/" + name, "selects no pod template")
            continue
        containers = [c for t in pods for c in t["spec"]["containers"]]
        ports = {p["name"]: c for c in containers for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            target = p.get("targetPort")
            if isinstance(target, str) and target not in ports:
                problem("Service/" + name, "targetPort %s is no container port" % target)
                continue
            if p.get("appProtocol") == "kubernetes.io/h2c" and target == "grpc" and serves_tls(ports[target]):
                problem("Service/" + name, "port %s declares appProtocol kubernetes.io/h2c (cleartext HTTP/2), "
                        "but its pods serve TLS there" % p["name"])


def tls_server_name(svc, docs):
    """The TLS name a Service's pods serve under, or None without TLS."""
    for t in service_pods(svc, docs):
        for c in t["spec"]["containers"]:
            if serves_tls(c):
                return env_value(c, "CAIRN_TLS_SERVER_NAME") or "localhost"
    return None


def check_gateway(ctx, docs):
    policies = ctx["by_kind"].get("BackendTLSPolicy", {})
    for name, route in ctx["by_kind"].get("GRPCRoute", {}).items():
        for rule in route["spec"].get("rules", []):
            for ref in rule.get("backendRefs", []):
                svc = ctx["services"].get(ref["name"])
                where = "GRPCRoute/%s backend %s" % (name, ref["name"])
                if svc is None:
                    problem(where, "names no rendered Service")
                    continue
                port = next((p for p in svc["spec"]["ports"] if p["port"] == ref.get("port")), None)
                if port is None:
                    problem(where, "Service has no port %s" % ref.get("port"))
                    continue
                server_name = tls_server_name(svc, docs)
                if server_name is None:
                    continue
                matching = [p for p in policies.values() for t in p["spec"]["targetRefs"]
                            if t.get("kind") == "Service" and t["name"] == ref["name"]
                            and t.get("sectionName") in (None, port.get("name"))]
                if not matching:
                    problem(where, "its pods serve TLS, but no BackendTLSPolicy targets Service %s port %s: "
                            "the Gateway would speak plaintext to a TLS port" % (ref["name"], port.get("name")))
                for pol in matching:
                    if pol["spec"]["validation"].get("hostname") != server_name:
                        problem("BackendTLSPolicy/" + pol["metadata"]["name"], "hostname %r, but the certificate "
                                "is checked as %r" % (pol["spec"]["validation"].get("hostname"), server_name))
    for name, pol in policies.items():
        for ref in pol["spec"]["validation"].get("caCertificateRefs", []):
            known = ctx["secrets"] if ref["kind"] == "Secret" else set(ctx["configmaps"]) | ctx["given_configmaps"]
            if ref["name"] not in known:
                problem("BackendTLSPolicy/" + name, "CA %s/%s is neither rendered nor given" % (ref["kind"], ref["name"]))


def exported_metrics(path):
    with open(path) as f:
        return set(re.findall(r'"(cairn_[a-z0-9_]+)"', f.read()))


def check_metric_names(ctx, exported):
    def check(where, text):
        for m in METRIC.findall(text):
            base = re.sub(r"_(bucket|sum|count)$", "", m)
            if m not in exported and base not in exported:
                problem(where, "metric %s is not exported by the server" % m)

    for name, rule in ctx["by_kind"].get("PrometheusRule", {}).items():
        for group in rule["spec"]["groups"]:
            for r in group["rules"]:
                check("PrometheusRule/%s %s" % (name, r.get("alert")), r["expr"])
    for name, cm in ctx["configmaps"].items():
        for key, text in (cm.get("data") or {}).items():
            if not key.endswith(".json"):
                continue
            try:
                dashboard = json.loads(text)
            except ValueError as e:
                problem("ConfigMap/%s %s" % (name, key), "is not JSON: %s" % e)
                continue
            for panel in dashboard.get("panels", []):
                for target in panel.get("targets", []):
                    check("ConfigMap/%s panel %r" % (name, panel.get("title")), target.get("expr", ""))
    for name, hpa in ctx["by_kind"].get("HorizontalPodAutoscaler", {}).items():
        for m in hpa["spec"].get("metrics", []):
            check("HorizontalPodAutoscaler/" + name, json.dumps(m))
    for name, so in ctx["by_kind"].get("ScaledObject", {}).items():
        for t in so["spec"]["triggers"]:
            check("ScaledObject/" + name, t["metadata"].get("query", ""))


def check_scaling_and_monitoring(ctx):
    statefulsets = ctx["by_kind"].get("StatefulSet", {})
    for kind in ("HorizontalPodAutoscaler", "ScaledObject"):
        for name, obj in ctx["by_kind"].get(kind, {}).items():
            target = obj["spec"]["scaleTargetRef"]
            sts = statefulsets.get(target["name"])
            if target.get("kind") != "StatefulSet" or sts is None:
                problem("%s/%s" % (kind, name), "scaleTargetRef names no rendered StatefulSet")
            elif "replicas" in sts["spec"]:
                problem("StatefulSet/" + target["name"], "sets replicas while %s/%s scales it "
                        "(every upgrade would reset the autoscaler's count)" % (kind, name))
    for name, sm in ctx["by_kind"].get("ServiceMonitor", {}).items():
        want = {e["port"] for e in sm["spec"]["endpoints"]}
        matched = [s for s in ctx["services"].values()
                   if selects(sm["spec"]["selector"]["matchLabels"], s["metadata"].get("labels", {}))]
        if not matched:
            problem("ServiceMonitor/" + name, "selects no Service")
        for s in matched:
            if want - {p["name"] for p in s["spec"]["ports"]}:
                problem("ServiceMonitor/" + name, "Service %s has no port %s" % (s["metadata"]["name"], want))
            if "grpc" in {p["name"] for p in s["spec"]["ports"]}:
                problem("Service/" + s["metadata"]["name"], "carries both the API and the metrics")


def check_envoy(ctx, header):
    for name, cm in ctx["configmaps"].items():
        if "envoy.yaml" not in (cm.get("data") or {}):
            continue
        where = "ConfigMap/%s envoy.yaml" % name
        try:
            envoy = yaml.safe_load(cm["data"]["envoy.yaml"])
        except yaml.YAMLError as e:
            problem(where, "does not parse: %s" % e)
            continue
        cluster = envoy["static_resources"]["clusters"][0]
        if cluster.get("lb_policy") != "RING_HASH":
            problem(where, "lb_policy is not RING_HASH")
        hcm = envoy["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        route = hcm["route_config"]["virtual_hosts"][0]["routes"][0]["route"]
        if route.get("hash_policy") != [{"header": {"header_name": header}}]:
            problem(where, "does not hash on %s" % header)
        if route.get("cluster") != cluster["name"]:
            problem(where, "route names cluster %s, not %s" % (route.get("cluster"), cluster["name"]))
        address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
        host = address["socket_address"]["address"].split(".")[0]
        if ctx["services"].get(host, {}).get("spec", {}).get("clusterIP") != "None":
            problem(where, "endpoint %s is not the headless Service" % host)


def given_objects(values_path):
    """The Secrets, ConfigMaps and claims a values file says exist already."""
    given = {"Secret": set(), "ConfigMap": set(), "PersistentVolumeClaim": set()}
    if not values_path:
        return given
    with open(values_path) as f:
        v = yaml.safe_load(f) or {}
    for key in ("tls", "auth", "snapshotKey"):
        if (v.get(key) or {}).get("existingSecret"):
            given["Secret"].add(v[key]["existingSecret"])
    if (v.get("sharedSessions") or {}).get("existingClaim"):
        given["PersistentVolumeClaim"].add(v["sharedSessions"]["existingClaim"])
    if ((v.get("proxy") or {}).get("gateway") or {}).get("caConfigMap"):
        given["ConfigMap"].add(v["proxy"]["gateway"]["caConfigMap"])
    for vol in [v.get("modelVolume") or {}] + (v.get("extraVolumes") or []):
        if "persistentVolumeClaim" in vol:
            given["PersistentVolumeClaim"].add(vol["persistentVolumeClaim"]["claimName"])
        if "secret" in vol:
            given["Secret"].add(vol["secret"]["secretName"])
        if "configMap" in vol:
            given["ConfigMap"].add(vol["configMap"]["name"])
    return given


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rendered", help="the JSON of helm/check/render -json")
    ap.add_argument("--yaml", required=True, help="the rendered YAML (scanned for Go float notation)")
    ap.add_argument("--metrics-source", required=True, help="the server's source naming its metrics")
    ap.add_argument("--values", help="the values file rendered: the objects it names exist already")
    ap.add_argument("--header", default="x-cairn-session")
    args = ap.parse_args()
    with open(args.rendered) as f:
        docs = [e["object"] for e in json.load(f)]
    with open(args.yaml) as f:
        for n, line in enumerate(f, 1):
            if GO_FLOAT.search(line) and not line.lstrip().startswith("#"):
                problem("%s:%d" % (args.yaml, n), "a number printed as a Go float (%s): convert it with int"
                        % GO_FLOAT.search(line).group(0))
    if not docs:
        problem(args.rendered, "no manifest")
    by_kind = {}
    for d in docs:
        name = (d.get("metadata") or {}).get("name") or ""
        if len(name) > 63 or not DNS1123.match(name):
            problem(name_of(d), "name %r is not a DNS-1123 label" % name)
        by_kind.setdefault(d["kind"], {})[name] = d
    given = given_objects(args.values)
    ctx = {
        "by_kind": by_kind,
        "services": by_kind.get("Service", {}),
        "secrets": set(by_kind.get("Secret", {})) | given["Secret"],
        "configmaps": by_kind.get("ConfigMap", {}),
        "given_configmaps": given["ConfigMap"],
        "claims": set(by_kind.get("PersistentVolumeClaim", {})) | given["PersistentVolumeClaim"],
    }
    for owner, tmpl in pod_owners(docs):
        check_pod_references(owner, tmpl, ctx)
        check_restricted(owner, tmpl)
    check_services(ctx, docs)
    check_gateway(ctx, docs)
    check_metric_names(ctx, exported_metrics(args.metrics_source))
    check_scaling_and_monitoring(ctx)
    check_envoy(ctx, args.header)
    for p in problems:
        print("problem:", p)
    kinds = sorted("%s %s" % (k, n) for k, names in by_kind.items() for n in names)
    print("%s: %d objects (%s), %d problems" % (args.rendered, len(docs), ", ".join(kinds), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
