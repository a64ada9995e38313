// Validates rendered manifests (the JSON of helm/check/render -json) against
// the published schemas of their kinds, offline: the OpenAPI schemas of
// Kubernetes and the CRD schemas of the Gateway API, Envoy Gateway, the
// Prometheus operator and KEDA, as npm's kubernetes-models packages ship
// them (compiled to JSON-schema validators by ajv). Pinned in package.json.
//
// Two checks per object:
//   1. the schema's validator: types, required fields, enums, patterns,
//      formats, bounds;
//   2. unknown fields, which the schemas themselves allow but the API server
//      rejects (`kubectl apply` validates strictly since Kubernetes 1.25, and
//      Helm's install validates too): a field is known when the validator
//      looked it up. Every object is wrapped in a Proxy that records the
//      properties the validator reads; an object whose validator read some of
//      its properties but not all has unknown fields. An object it read no
//      property of by name is free-form in its schema (labels, annotations,
//      x-kubernetes-preserve-unknown-fields) and is not judged.
// An object whose kind has no schema here fails: every object is validated.
//
//   node validate.mjs --modules NODE_MODULES_DIR RENDERED.json
// Prints one line per problem and a summary; exits 1 on any problem.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// The kinds validated, by apiVersion: [package, schema module prefix, kinds].
// kubernetes-models names its modules IoK8sApi<Group><Version><Kind>.
const SCHEMAS = {
  "v1": ["kubernetes-models", "IoK8sApiCoreV1",
    ["ConfigMap", "Secret", "Service", "ServiceAccount", "PersistentVolumeClaim", "Pod"]],
  "apps/v1": ["kubernetes-models", "IoK8sApiAppsV1", ["StatefulSet", "Deployment"]],
  "policy/v1": ["kubernetes-models", "IoK8sApiPolicyV1", ["PodDisruptionBudget"]],
  "autoscaling/v2": ["kubernetes-models", "IoK8sApiAutoscalingV2", ["HorizontalPodAutoscaler"]],
  "gateway.networking.k8s.io/v1": ["@kubernetes-models/gateway-api", "IoK8sSigsGatewayApiApisV1",
    ["GRPCRoute", "BackendTLSPolicy"]],
  "gateway.envoyproxy.io/v1alpha1": ["@kubernetes-models/envoy-gateway",
    "ComGithubEnvoyproxyGatewayApiV1alpha1", ["BackendTrafficPolicy"]],
  "monitoring.coreos.com/v1": ["@kubernetes-models/prometheus-operator",
    "ComGithubPrometheusOperatorPrometheusOperatorPkgApisMonitoringV1", ["ServiceMonitor", "PrometheusRule"]],
  "keda.sh/v1alpha1": ["@kubernetes-models/keda", "ComGithubKedacoreKedaV2ApisKedaV1alpha1", ["ScaledObject"]],
};

// The compiled schema of apiVersion/kind: a file URL, or null.
function schemaModule(modules, apiVersion, kind) {
  const entry = SCHEMAS[apiVersion];
  if (!entry || !entry[2].includes(kind)) return null;
  return pathToFileURL(join(modules, entry[0], "_schemas", `${entry[1]}${kind}.js`)).href;
}

function parseArgs(argv) {
  const args = { modules: null, files: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--modules") args.modules = argv[++i];
    else args.files.push(argv[i]);
  }
  if (!args.modules || args.files.length !== 1) {
    console.error("usage: node validate.mjs --modules NODE_MODULES_DIR RENDERED.json");
    process.exit(2);
  }
  return args;
}

const pointer = (key) => String(key).replace(/~/g, "~0").replace(/\//g, "~1");

// Copies `value`, wrapping every object in a Proxy that records which of its
// properties are read; `records` receives {path, keys, read} per object.
function tracked(value, path, records) {
  if (Array.isArray(value)) return value.map((v, i) => tracked(v, `${path}/${i}`, records));
  if (value === null || typeof value !== "object") return value;
  const copy = {};
  for (const [k, v] of Object.entries(value)) copy[k] = tracked(v, `${path}/${pointer(k)}`, records);
  const record = { path: path || "/", keys: Object.keys(value), read: new Set() };
  records.push(record);
  return new Proxy(copy, {
    get(target, key, receiver) {
      if (typeof key === "string") record.read.add(key);
      return Reflect.get(target, key, receiver);
    },
    has(target, key) {
      if (typeof key === "string") record.read.add(key);
      return Reflect.has(target, key);
    },
  });
}

function describe(error) {
  const where = error.instancePath || "/";
  const p = error.params || {};
  switch (error.keyword) {
    case "required": return `${where}: missing required field "${p.missingProperty}"`;
    case "type": return `${where}: must be ${p.type}`;
    case "enum": return `${where}: must be one of ${JSON.stringify(p.allowedValues)}`;
    case "pattern": return `${where}: must match ${p.pattern}`;
    case "format": return `${where}: must be a ${p.format}`;
    default: return `${where}: ${error.keyword} ${JSON.stringify(p)}`;
  }
}

async function validateObject(modules, object) {
  const url = schemaModule(modules, object.apiVersion, object.kind);
  if (!url) {
    return [`no schema for ${object.apiVersion}/${object.kind} in helm/check/schemas/validate.mjs: every object must be validated`];
  }
  const { validate } = await import(url);
  const records = [];
  const problems = [];
  if (!validate(tracked(object, "", records))) {
    for (const e of validate.errors) problems.push(describe(e));
  }
  for (const r of records) {
    if (r.read.size === 0) continue;
    const unknown = r.keys.filter((k) => !r.read.has(k));
    for (const k of unknown) {
      const known = [...r.read].filter((x) => !x.startsWith("$")).sort().join(", ");
      problems.push(`${r.path}: unknown field "${k}" (the schema has: ${known})`);
    }
  }
  return problems;
}

const args = parseArgs(process.argv.slice(2));
const entries = JSON.parse(readFileSync(args.files[0], "utf8"));
let failed = 0;
const kinds = {};
for (const { source, object } of entries) {
  const name = `${object.kind}/${object.metadata?.name} (${source})`;
  const problems = await validateObject(args.modules, object);
  kinds[`${object.apiVersion}/${object.kind}`] = (kinds[`${object.apiVersion}/${object.kind}`] || 0) + 1;
  for (const p of problems) console.log(`schema: ${name}: ${p}`);
  if (problems.length) failed++;
}
const summary = Object.entries(kinds).map(([k, n]) => `${n} ${k}`).join(", ");
console.log(`${args.files[0]}: ${entries.length} objects validated against their schemas (${summary}), ${failed} invalid`);
process.exit(failed ? 1 : 0);
