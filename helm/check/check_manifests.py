#!/usr/bin/python3
"""Checks manifests rendered from helm/cairn (by helm/check/render) offline.

- every document parses and has apiVersion, kind and a DNS-1123 name;
- built-in kinds are checked field by field against the Kubernetes API
  models of Debian's python3-kubernetes (unknown fields, wrong types and
  missing required fields are errors). Those models are of Kubernetes 1.22,
  older than the gRPC probe (1.24), which is checked here by hand;
- references between objects resolve: selectors select the pod templates,
  the StatefulSet's serviceName is a headless Service, volume mounts name a
  volume or claim template, Services' target ports name container ports,
  Secret/ConfigMap volumes name rendered objects (or the existing Secrets
  given in the values), --replica-name comes from the POD_NAME variable;
- Envoy's configuration (in its ConfigMap) parses, hashes on the affinity
  header with RING_HASH, and its cluster is the headless Service's name.

  check_manifests.py RENDERED.yaml [--header x-cairn-session] [--existing-secret NAME]...
Exits 1 listing every problem.
"""
import argparse
import re
import sys

import yaml
from kubernetes import client

MODELS = {
    ("v1", "Service"): "V1Service",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
}
# Custom resources: checked for shape only (their CRDs are not here).
CUSTOM = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("gateway.networking.k8s.io/v1", "GRPCRoute"),
          ("gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy")}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object, "datetime": str}

problems = []


def problem(where, msg):
    problems.append("%s: %s" % (where, msg))


def check_fields(value, type_name, where):
    """Walks `value` against the python client's model `type_name`."""
    if type_name in PRIMITIVES:
        if not isinstance(value, PRIMITIVES[type_name]) or (type_name == "int" and isinstance(value, bool)):
            problem(where, "expected %s, got %r" % (type_name, value))
        return
    m = re.match(r"list\[(.*)\]$", type_name)
    if m:
        if not isinstance(value, list):
            problem(where, "expected a list")
            return
        for i, v in enumerate(value):
            check_fields(v, m.group(1), "%s[%d]" % (where, i))
        return
    m = re.match(r"dict\(str, (.*)\)$", type_name)
    if m:
        if not isinstance(value, dict):
            problem(where, "expected a map")
            return
        for k, v in value.items():
            check_fields(v, m.group(1), "%s.%s" % (where, k))
        return
    model = getattr(client, type_name)
    if not isinstance(value, dict):
        problem(where, "expected an object (%s)" % type_name)
        return
    by_json = {j: a for a, j in model.attribute_map.items()}
    for key, v in value.items():
        if type_name == "V1Probe" and key == "grpc":  # Kubernetes 1.24+
            if not isinstance(v, dict) or set(v) - {"port", "service"} or not isinstance(v.get("port"), int):
                problem(where + ".grpc", "a gRPC probe is {port: int, service: string}")
            continue
        if key not in by_json:
            problem(where, "unknown field %r in %s" % (key, type_name))
            continue
        check_fields(v, model.openapi_types[by_json[key]], "%s.%s" % (where, key))


def check_required(doc, type_name, where):
    """The models' own validation: required fields present."""
    try:
        client.ApiClient()._ApiClient__deserialize(doc, type_name)
    except (ValueError, TypeError) as e:
        problem(where, "does not deserialize: %s" % e)


def pod_specs(docs):
    for d in docs:
        if d["kind"] in ("StatefulSet", "Deployment"):
            yield d, d["spec"]["template"]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rendered")
    ap.add_argument("--header", default="x-cairn-session")
    ap.add_argument("--existing-secret", action="append", default=[])
    args = ap.parse_args()
    with open(args.rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    if not docs:
        problem(args.rendered, "no manifest")
    by_kind = {}
    for d in docs:
        where = "%s/%s" % (d.get("kind"), (d.get("metadata") or {}).get("name"))
        if not d.get("apiVersion") or not d.get("kind") or not (d.get("metadata") or {}).get("name"):
            problem(where, "needs apiVersion, kind and metadata.name")
            continue
        name = d["metadata"]["name"]
        if len(name) > 63 or not DNS1123.match(name):
            problem(where, "name %r is not a DNS-1123 label" % name)
        key = (d["apiVersion"], d["kind"])
        if key in MODELS:
            check_fields(d, MODELS[key], where)
            check_required(d, MODELS[key], where)
        elif key not in CUSTOM:
            problem(where, "unexpected apiVersion/kind %s" % (key,))
        by_kind.setdefault(d["kind"], {})[name] = d

    services = by_kind.get("Service", {})
    secrets = set(by_kind.get("Secret", {})) | set(args.existing_secret)
    configmaps = by_kind.get("ConfigMap", {})
    claims = set(by_kind.get("PersistentVolumeClaim", {}))
    for owner, tmpl in pod_specs(docs):
        where = "%s/%s" % (owner["kind"], owner["metadata"]["name"])
        labels = tmpl["metadata"].get("labels", {})
        if not selects(owner["spec"]["selector"].get("matchLabels"), labels):
            problem(where, "selector does not select its pod template")
        spec = tmpl["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        templates = {t["metadata"]["name"] for t in owner["spec"].get("volumeClaimTemplates", [])}
        for v in volumes.values():
            if "secret" in v and v["secret"]["secretName"] not in secrets:
                problem(where, "volume %s: Secret %s is neither rendered nor given" % (v["name"], v["secret"]["secretName"]))
            if "configMap" in v and v["configMap"]["name"] not in configmaps:
                problem(where, "volume %s: ConfigMap %s is not rendered" % (v["name"], v["configMap"]["name"]))
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] not in claims \
                    and v["name"] != "models":
                problem(where, "volume %s: claim %s is not rendered" % (v["name"], v["persistentVolumeClaim"]["claimName"]))
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes and m["name"] not in templates:
                    problem(where, "mount %s names no volume" % m["name"])
            args_ = c.get("args", [])
            if any("$(POD_NAME)" in a for a in args_) and \
                    not any(e["name"] == "POD_NAME" for e in c.get("env", [])):
                problem(where, "$(POD_NAME) without a POD_NAME variable")
        if owner["kind"] == "StatefulSet":
            svc = services.get(owner["spec"]["serviceName"])
            if svc is None or svc["spec"].get("clusterIP") != "None":
                problem(where, "serviceName %s is not a headless Service" % owner["spec"]["serviceName"])
            args_ = spec["containers"][0].get("args", [])
            if "--replica-name=$(POD_NAME)" not in args_:
                problem(where, "replicas are not named after their pods")
    for name, svc in services.items():
        pods = [t for _, t in pod_specs(docs) if selects(svc["spec"].get("selector"), t["metadata"].get("labels", {}))]
        if not pods:
            problem("Service/" + name, "selects no pod template")
            continue
        ports = {p["name"] for t in pods for c in t["spec"]["containers"] for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            if isinstance(p.get("targetPort"), str) and p["targetPort"] not in ports:
                problem("Service/" + name, "targetPort %s is no container port" % p["targetPort"])
    for name, pdb in by_kind.get("PodDisruptionBudget", {}).items():
        if not any(selects(pdb["spec"]["selector"]["matchLabels"], t["metadata"].get("labels", {}))
                   for _, t in pod_specs(docs)):
            problem("PodDisruptionBudget/" + name, "selects no pod")
    for name, cm in configmaps.items():
        if "envoy.yaml" not in cm.get("data", {}):
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
        if route.get("hash_policy") != [{"header": {"header_name": args.header}}]:
            problem(where, "does not hash on %s" % args.header)
        if route.get("cluster") != cluster["name"]:
            problem(where, "route names cluster %s, not %s" % (route.get("cluster"), cluster["name"]))
        address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
        host = address["socket_address"]["address"].split(".")[0]
        if services.get(host, {}).get("spec", {}).get("clusterIP") != "None":
            problem(where, "endpoint %s is not the headless Service" % host)
    for p in problems:
        print("problem:", p)
    kinds = sorted("%s %s" % (k, n) for k, names in by_kind.items() for n in names)
    print("%s: %d objects (%s), %d problems" % (args.rendered, len(docs), ", ".join(kinds), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
