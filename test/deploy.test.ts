/**
 * The deployment files, checked offline (no cluster, no Docker engine):
 * - every YAML under deploy/ parses;
 * - every kustomization under deploy/k8s is rendered by `kubectl kustomize` (kubectl is a test
 *   dependency: Debian/Kubernetes package), and every object it produces is validated against
 *   the Kubernetes OpenAPI schemas of kubernetes-models (KEDA's ScaledObject against
 *   @kubernetes-models/keda);
 * - cross-references that drift silently otherwise: env names against each service's config
 *   schema, probes and annotations against the ports the services listen on, selectors against
 *   pod labels, KEDA consumers against packages/contracts and the consumers each service runs,
 *   secret keys against the runbook's `kubectl create secret`, the image against the launcher;
 * - the chart values files have the keys memstream relies on (no chart schemas exist offline).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { CONSUMERS, MEMORY_EVENTS_CONSUMER, STREAM_DOCS, STREAM_MEMORY, STREAM_WEBHOOK_DELIVERIES, WEBHOOK_DELIVERY_CONSUMER } from '@memstream/contracts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEPLOY = path.join(ROOT, 'deploy');
const K8S = path.join(DEPLOY, 'k8s');
const read = (p: string) => readFileSync(p, 'utf8');

// The manifests are untyped YAML: a loose record type, checked by the schemas below.
type K8sObject = Record<string, any>;

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const clone = <T>(v: T): T => structuredClone(v);

function loadDocs(file: string): K8sObject[] {
  const docs = parseAllDocuments(read(file), { merge: true });
  const out: K8sObject[] = [];
  for (const d of docs) {
    if (d.errors.length) throw new Error(`${path.relative(ROOT, file)}: ${d.errors.map((e) => e.message).join('; ')}`);
    const v = d.toJS() as unknown;
    if (v === null || v === undefined) continue;
    if (!isPlainObject(v)) throw new Error(`${path.relative(ROOT, file)}: a document that is not a mapping`);
    out.push(v);
  }
  return out;
}

/**
 * Render a kustomization with `kubectl kustomize` (kustomize v5, offline: it reads only the
 * files), the same build `kubectl apply -k` sends to a cluster.
 */
function kustomize(dir: string): K8sObject[] {
  const out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const objs = parseAllDocuments(out)
    .map((d) => d.toJS() as K8sObject)
    .filter((o) => isPlainObject(o));
  // kustomize wraps long base64 Secret data in a literal block (newlines every 70 characters);
  // the API server's base64 decoding skips them, the schemas' "byte" format does not.
  for (const o of objs) if (o.kind === 'Secret' && isPlainObject(o.data)) for (const k of Object.keys(o.data)) o.data[k] = String(o.data[k]).replace(/\s+/g, '');
  return objs;
}

/** Every kustomization under deploy/k8s: the overlays a user applies, and the bases they are built from. */
const KUSTOMIZATIONS = readdirSync(K8S, { recursive: true })
  .map(String)
  .filter((f) => path.basename(f) === 'kustomization.yaml')
  .map((f) => path.dirname(f))
  .sort();
const OVERLAYS = KUSTOMIZATIONS.filter((d) => d.startsWith('overlays/')).map((d) => d.slice('overlays/'.length));

// ------------------------------------------------------------------------------------------
// What the code says: services, their config schemas, their consumers, the launcher.
// ------------------------------------------------------------------------------------------

const SERVICES = readdirSync(path.join(ROOT, 'services')).filter((s) => existsSync(path.join(ROOT, 'services', s, 'src', 'main.ts')));
const WORKERS = SERVICES.filter((s) => s !== 'gateway');

/**
 * Variables a service reads outside its config.ts schema, and where: the OpenTelemetry SDK reads
 * the standard OTEL_* variables itself; the telemetry package reads its own. Each claim is checked
 * against the named sources, so a rename there fails here.
 */
const READ_ELSEWHERE: Record<string, string[]> = {
  MEMSTREAM_OPS_PORT: ['packages/bus/src/worker.ts'],
  MEMSTREAM_OPS_HOST: ['packages/bus/src/worker.ts'],
  MEMSTREAM_METRICS_TOKEN: ['packages/telemetry/src'],
};
const OTEL_STANDARD = new Set(['OTEL_SERVICE_NAME', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_RESOURCE_ATTRIBUTES', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG']);

function sourceText(rel: string): string {
  const p = path.join(ROOT, rel);
  if (!existsSync(p)) return '';
  if (statSync(p).isFile()) return read(p);
  return readdirSync(p, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => read(path.join(p, f)))
    .join('\n');
}

const configKeys = new Map<string, Set<string>>();
async function loadConfigKeys(): Promise<void> {
  for (const s of SERVICES) {
    const mod = (await import(pathToFileURL(path.join(ROOT, 'services', s, 'src', 'config.ts')).href)) as { Config?: { shape?: Record<string, unknown> } };
    const shape = mod.Config?.shape;
    if (!shape) throw new Error(`services/${s}/src/config.ts exports no zod object Config`);
    configKeys.set(s, new Set(Object.keys(shape)));
  }
}

/** Problems with env var `name` for `service`, or null when the service reads it. */
function envProblem(service: string, name: string): string | null {
  if (configKeys.get(service)?.has(name)) return null;
  if (OTEL_STANDARD.has(name)) return null;
  const elsewhere = READ_ELSEWHERE[name];
  if (elsewhere) return elsewhere.some((p) => sourceText(p).includes(name)) ? null : `${name} is said to be read in ${elsewhere.join(' or ')}, which do not mention it`;
  return `${service} does not read ${name} (not in services/${service}/src/config.ts)`;
}

/** The consumers (CONSUMERS keys) each service runs: `consumer: 'x'` in its main.ts. */
function consumersOf(service: string): string[] {
  const src = read(path.join(ROOT, 'services', service, 'src', 'main.ts'));
  return [...src.matchAll(/consumer:\s*'([A-Za-z]+)'/g)].map((m) => m[1]!);
}

/** The (stream, durable) pairs a service pulls from: its DOCS consumers, and the webhook delivery queue if it uses it. */
function pullsFrom(service: string): string[] {
  // A stage's bulk-lane durable beside its own (docs/pipeline.md, "Fairness").
  const pairs = consumersOf(service).flatMap((k) => {
    const c = (CONSUMERS as Record<string, { durable: string; bulkDurable?: string }>)[k];
    return [`${STREAM_DOCS}/${c?.durable ?? `(unknown consumer ${k})`}`, ...(c?.bulkDurable ? [`${STREAM_DOCS}/${c.bulkDurable}`] : [])];
  });
  if (sourceText(`services/${service}/src`).includes('WEBHOOK_DELIVERY_CONSUMER')) pairs.push(`${STREAM_WEBHOOK_DELIVERIES}/${WEBHOOK_DELIVERY_CONSUMER}`);
  if (sourceText(`services/${service}/src`).includes('MEMORY_EVENTS_CONSUMER')) pairs.push(`${STREAM_MEMORY}/${MEMORY_EVENTS_CONSUMER}`);
  return pairs.sort();
}

const launcher = read(path.join(ROOT, 'memstream'));
const launcherVar = (name: string) => new RegExp(`^${name}="?([^"\\n]*)"?`, 'm').exec(launcher)?.[1] ?? '';

// ------------------------------------------------------------------------------------------

// `never`: each class takes its own object type; validate() below hands them the untyped YAML.
type ModelClass = new (o: never) => { validate(): void };
const MODELS: Record<string, ModelClass> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/ServiceAccount': ServiceAccount,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'batch/v1/Job': Job,
};

function validate(o: K8sObject): void {
  const Model = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!Model) throw new Error(`no schema for ${o.apiVersion}/${o.kind} (${o.metadata?.name})`);
  try {
    new (Model as unknown as new (o: K8sObject) => { validate(): void })(o).validate();
  } catch (err) {
    throw new Error(`${o.kind}/${o.metadata?.name}: ${(err as Error).message}`);
  }
}

const matches = (selector: Record<string, string>, labels: Record<string, string> | undefined) =>
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

/** A NetworkPolicy/PDB-style label selector (matchLabels and matchExpressions In/NotIn/Exists). */
function selects(sel: K8sObject, labels: Record<string, string>): boolean {
  if (sel.matchLabels && !matches(sel.matchLabels, labels)) return false;
  for (const e of (sel.matchExpressions ?? []) as K8sObject[]) {
    const v = labels[e.key];
    if (e.operator === 'In' && !(e.values as string[]).includes(v!)) return false;
    if (e.operator === 'NotIn' && (e.values as string[]).includes(v!)) return false;
    if (e.operator === 'Exists' && v === undefined) return false;
    if (e.operator === 'DoesNotExist' && v !== undefined) return false;
  }
  return true;
}

const byKind = (objs: K8sObject[], kind: string) => objs.filter((o) => o.kind === kind);
const named = (objs: K8sObject[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata?.name === name);
const serviceOf = (d: K8sObject): string => d.spec.template.metadata.labels['app.kubernetes.io/component'];
const container = (d: K8sObject): K8sObject => d.spec.template.spec.containers[0];

/** The value an env entry resolves to, through the build's ConfigMaps; undefined for secrets. */
function envValue(objs: K8sObject[], d: K8sObject, name: string): string | undefined {
  const e = (container(d).env as K8sObject[]).find((x) => x.name === name);
  if (!e) return undefined;
  if ('value' in e) return String(e.value);
  const ref = e.valueFrom?.configMapKeyRef;
  return ref ? named(objs, 'ConfigMap', ref.name)?.data?.[ref.key] : undefined;
}

const builds: Record<string, K8sObject[]> = {};

beforeAll(async () => {
  await loadConfigKeys();
  for (const k of KUSTOMIZATIONS) builds[k] = kustomize(path.join(K8S, k));
  for (const overlay of OVERLAYS) builds[overlay] = builds[`overlays/${overlay}`]!;
});

describe('YAML under deploy/', () => {
  it('parses, every document, and every Kubernetes document has apiVersion, kind and a name', () => {
    const files = readdirSync(DEPLOY, { recursive: true })
      .map(String)
      .filter((f) => /\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThan(15);
    for (const f of files) {
      const docs = loadDocs(path.join(DEPLOY, f));
      expect(docs.length, f).toBeGreaterThan(0);
      if (f.startsWith('k8s/')) for (const d of docs) expect([d.apiVersion, d.kind, d.metadata?.name ?? d.kind].every(Boolean), `${f}: ${JSON.stringify(d).slice(0, 80)}`).toBe(true);
    }
  });
});

describe('kubectl kustomize', () => {
  it('renders every kustomization under deploy/k8s, and every object validates against the Kubernetes (and KEDA) schemas', () => {
    expect(KUSTOMIZATIONS).toEqual(expect.arrayContaining(['base', 'autoscaling', 'overlays/dev', 'overlays/production']));
    expect(OVERLAYS).toEqual(expect.arrayContaining(['dev', 'production']));
    for (const k of KUSTOMIZATIONS) {
      expect(builds[k]!.length, k).toBeGreaterThan(0);
      for (const o of builds[k]!) {
        try {
          validate(o);
        } catch (err) {
          throw new Error(`${k}: ${o.kind}/${o.metadata?.name}: ${String(err)}`);
        }
      }
    }
  });

  it('the schemas catch a broken object (so a pass below means something)', () => {
    const d = clone(named(builds.production!, 'Deployment', 'memstream-gateway')!);
    expect(() => validate(d)).not.toThrow();
    d.spec.replicas = 'three';
    expect(() => validate(d)).toThrow(/replicas must be integer/);
    const s = clone(named(builds.production!, 'ScaledObject', 'memstream-chunker')!);
    s.spec.triggers[0].metadata.lagThreshold = 200;
    expect(() => validate(s)).toThrow(/must be string/);
  });
});

describe.each(OVERLAYS)('overlays/%s', (overlay) => {
  const objs = () => builds[overlay]!;
  const namespace = overlay === 'dev' ? 'memstream-dev' : 'memstream';

  it('builds into objects that validate against the Kubernetes (and KEDA) schemas, each once, in the namespace', () => {
    const ids = objs().map((o) => `${o.kind}/${o.metadata.name}`);
    expect(new Set(ids).size, 'duplicate objects').toBe(ids.length);
    for (const o of objs()) {
      validate(o);
      expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(namespace);
      expect(o.metadata.labels?.['app.kubernetes.io/part-of'], `${o.kind}/${o.metadata.name}`).toBe('memstream');
    }
  });

  it('has a Deployment and a PodDisruptionBudget for every service in services/', () => {
    expect(SERVICES).toContain('gateway');
    for (const s of SERVICES) {
      const d = named(objs(), 'Deployment', `memstream-${s}`);
      expect(d, `Deployment memstream-${s}`).toBeDefined();
      const pdbs = byKind(objs(), 'PodDisruptionBudget').filter((p) => selects(p.spec.selector, d!.spec.template.metadata.labels));
      expect(pdbs.map((p) => p.metadata.name), `PDB for ${s}`).toEqual([`memstream-${s}`]);
    }
    // and every PDB selects exactly one Deployment's pods
    for (const p of byKind(objs(), 'PodDisruptionBudget')) {
      expect(byKind(objs(), 'Deployment').filter((d) => selects(p.spec.selector, d.spec.template.metadata.labels)).length, p.metadata.name).toBe(1);
    }
  });

  it('Deployments: selector matches the pod labels, the image runs the service, non-root and read-only', () => {
    for (const d of byKind(objs(), 'Deployment')) {
      const name = d.metadata.name as string;
      const labels = d.spec.template.metadata.labels;
      expect(matches(d.spec.selector.matchLabels, labels), `${name} selector`).toBe(true);
      // Selectors are immutable: they must not carry labels that overlays or versions change.
      expect(Object.keys(d.spec.selector.matchLabels).sort(), name).toEqual(['app.kubernetes.io/component', 'app.kubernetes.io/name']);
      const s = serviceOf(d);
      expect(name).toBe(`memstream-${s}`);
      const c = container(d);
      expect(c.args, name).toEqual([`services/${s}/src/main.ts`]);
      expect(existsSync(path.join(ROOT, c.args[0])), c.args[0]).toBe(true);
      expect(c.image, name).toMatch(overlay === 'dev' ? /^memstream:dev$/ : /^registry\.example\.com\/memstream:0\.1\.0$/);
      expect(c.resources?.requests?.cpu && c.resources?.requests?.memory && c.resources?.limits?.memory, `${name} resources`).toBeTruthy();
      const pod = d.spec.template.spec;
      expect(pod.securityContext.runAsNonRoot, name).toBe(true);
      expect(pod.securityContext.runAsUser, name).toBeGreaterThan(0);
      expect(c.securityContext, name).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      // A read-only root needs writable /tmp (tsx's cache, work dirs) and the data dir.
      const mounts = (c.volumeMounts as K8sObject[]).map((m) => m.mountPath);
      expect(mounts, name).toContain('/tmp');
      expect(mounts, name).toContain(envValue(objs(), d, 'MEMSTREAM_DATA_DIR'));
      const volumes = new Set((pod.volumes as K8sObject[]).map((v) => v.name));
      for (const m of c.volumeMounts as K8sObject[]) expect(volumes.has(m.name), `${name} volume ${m.name}`).toBe(true);
      if (overlay === 'dev') expect(d.spec.replicas, name).toBe(1);
    }
  });

  it('env: every variable is one its service reads, and every ConfigMap/Secret reference resolves', () => {
    const problems: string[] = [];
    for (const d of byKind(objs(), 'Deployment')) {
      const s = serviceOf(d);
      for (const e of container(d).env as K8sObject[]) {
        const p = envProblem(s, e.name);
        if (p) problems.push(p);
        const cm = e.valueFrom?.configMapKeyRef;
        if (cm) {
          const m = named(objs(), 'ConfigMap', cm.name);
          if (!m) problems.push(`${s}: ConfigMap ${cm.name} is not in the build`);
          else if (!(cm.key in (m.data ?? {})) && !cm.optional) problems.push(`${s}: ConfigMap ${cm.name} has no key ${cm.key}`);
        }
      }
      expect(envValue(objs(), d, 'OTEL_SERVICE_NAME'), d.metadata.name).toBe(`memstream-${s}`);
    }
    expect(problems).toEqual([]);
    // Every ConfigMap key is read by some service that references it.
    const cmap = named(objs(), 'ConfigMap', 'memstream-config')!;
    const referenced = new Set(byKind(objs(), 'Deployment').flatMap((d) => (container(d).env as K8sObject[]).map((e) => e.valueFrom?.configMapKeyRef?.key).filter(Boolean)));
    for (const key of Object.keys(cmap.data)) expect(referenced.has(key), `ConfigMap key ${key} is used by no Deployment`).toBe(true);
  });

  it('the gateway and the embedder embed with the same settings', () => {
    const g = named(objs(), 'Deployment', 'memstream-gateway')!;
    const e = named(objs(), 'Deployment', 'memstream-embedder')!;
    for (const k of ['EMBEDDER', 'EMBEDDING_DIM', 'EMBEDDING_BASE_URL', 'EMBEDDING_MODEL']) expect(envValue(objs(), g, k), k).toBe(envValue(objs(), e, k));
  });

  it('secrets: every referenced key exists (dev) or is in the runbook\'s kubectl create secret (production)', () => {
    const refs = byKind(objs(), 'Deployment').flatMap((d) => (container(d).env as K8sObject[]).map((e) => e.valueFrom?.secretKeyRef).filter(Boolean)) as K8sObject[];
    expect(new Set(refs.map((r) => r.name))).toEqual(new Set(['memstream-secrets']));
    const secret = named(objs(), 'Secret', 'memstream-secrets');
    if (overlay === 'dev') {
      expect(secret).toBeDefined();
      for (const r of refs.filter((x) => !x.optional)) expect(Object.keys(secret!.data), r.key).toContain(r.key);
    } else {
      expect(secret, 'production must not carry a Secret in git').toBeUndefined();
      const runbook = read(path.join(ROOT, 'docs', 'runbook.md'));
      const create = /kubectl (?:-n \S+ )?create secret generic memstream-secrets[^`]*/.exec(runbook)?.[0] ?? '';
      expect(create, 'docs/runbook.md has the kubectl create secret command').not.toBe('');
      for (const key of new Set(refs.map((r) => r.key))) expect(create, `runbook's secret has ${key}`).toContain(`${key}=`);
    }
  });

  it('probes and scrape annotations point at the port the service listens on', () => {
    for (const d of byKind(objs(), 'Deployment')) {
      const s = serviceOf(d);
      const c = container(d);
      const ports = new Map((c.ports as K8sObject[]).map((p) => [p.name, p.containerPort]));
      const want = Number(envValue(objs(), d, s === 'gateway' ? 'MEMSTREAM_PORT' : 'MEMSTREAM_OPS_PORT'));
      expect(want, `${s} port from env`).toBeGreaterThan(0);
      // The kubelet probes the pod IP: the port must not be bound to loopback.
      expect(envValue(objs(), d, s === 'gateway' ? 'MEMSTREAM_HOST' : 'MEMSTREAM_OPS_HOST'), `${s} binds all interfaces`).toBe('0.0.0.0');
      for (const [probe, p] of [['livenessProbe', '/healthz'], ['readinessProbe', '/readyz'], ['startupProbe', '/healthz']] as const) {
        const get = c[probe]?.httpGet;
        expect(get?.path, `${s} ${probe}`).toBe(p);
        expect(ports.get(get.port) ?? get.port, `${s} ${probe} port`).toBe(want);
      }
      const ann = d.spec.template.metadata.annotations;
      expect(Number(ann['prometheus.io/port']), `${s} scrape port`).toBe(want);
      expect(ann['prometheus.io/path']).toBe('/metrics');
    }
  });

  it('the gateway Service selects the gateway pods on a named port that exists', () => {
    const svc = named(objs(), 'Service', 'memstream-gateway')!;
    const d = named(objs(), 'Deployment', 'memstream-gateway')!;
    expect(matches(svc.spec.selector, d.spec.template.metadata.labels)).toBe(true);
    expect(byKind(objs(), 'Deployment').filter((x) => matches(svc.spec.selector, x.spec.template.metadata.labels))).toHaveLength(1);
    const names = (container(d).ports as K8sObject[]).map((p) => p.name);
    for (const p of svc.spec.ports as K8sObject[]) expect(names).toContain(p.targetPort);
  });

  it('network policies: default deny, each policy selects pods, ports agree with the services and the ConfigMap', () => {
    const pols = byKind(objs(), 'NetworkPolicy');
    const pods = byKind(objs(), 'Deployment').map((d) => d.spec.template.metadata.labels as Record<string, string>);
    const deny = pols.find((p) => !p.spec.ingress && !p.spec.egress)!;
    expect(deny.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(pods.every((l) => selects(deny.spec.podSelector, l)), 'default deny selects every memstream pod').toBe(true);
    for (const p of pols) expect(pods.some((l) => selects(p.spec.podSelector, l)), `${p.metadata.name} selects no pod`).toBe(true);

    const egressPorts = (comp: string) => {
      const l = pods.find((x) => x['app.kubernetes.io/component'] === comp)!;
      return pols.filter((p) => p.spec.policyTypes.includes('Egress') && selects(p.spec.podSelector, l)).flatMap((p) => (p.spec.egress ?? []) as K8sObject[]);
    };
    const cmap = named(objs(), 'ConfigMap', 'memstream-config')!.data as Record<string, string>;
    const natsPort = Number(new URL(cmap.NATS_URL!).port);
    const qdrantPort = Number(new URL(cmap.QDRANT_URL!).port);
    for (const s of SERVICES) {
      const rules = egressPorts(s);
      const allowsPort = (port: number, podName: string) => rules.some((r) => (r.to as K8sObject[] | undefined)?.some((t) => t.podSelector?.matchLabels?.['app.kubernetes.io/name'] === podName) && (r.ports as K8sObject[]).some((x) => x.port === port));
      expect(allowsPort(natsPort, 'nats'), `${s} → NATS :${natsPort}`).toBe(true);
      expect(allowsPort(qdrantPort, 'qdrant'), `${s} → Qdrant :${qdrantPort}`).toBe(true);
      expect(allowsPort(27017, 'mongodb'), `${s} → MongoDB`).toBe(true);
      expect(rules.some((r) => (r.ports as K8sObject[] | undefined)?.some((x) => x.port === 53 && x.protocol === 'UDP')), `${s} → DNS`).toBe(true);
    }
    const internet = (s: string) => egressPorts(s).some((r) => (r.to as K8sObject[] | undefined)?.some((t) => t.ipBlock?.cidr === '0.0.0.0/0') && !r.ports);
    expect(internet('notifier'), 'notifier reaches webhook URLs on any port').toBe(true);
    expect(internet('extractor'), 'extractor fetches URLs on any port').toBe(true);
    expect(internet('chunker')).toBe(false);

    const ingressPorts = (comp: string) => {
      const l = pods.find((x) => x['app.kubernetes.io/component'] === comp)!;
      return pols.filter((p) => selects(p.spec.podSelector, l)).flatMap((p) => ((p.spec.ingress ?? []) as K8sObject[]).flatMap((r) => (r.ports as K8sObject[]).map((x) => x.port)));
    };
    const gw = named(objs(), 'Deployment', 'memstream-gateway')!;
    expect(ingressPorts('gateway')).toContain(Number(envValue(objs(), gw, 'MEMSTREAM_PORT')));
    for (const w of WORKERS) expect(ingressPorts(w), `${w} metrics`).toContain(Number(envValue(objs(), named(objs(), 'Deployment', `memstream-${w}`)!, 'MEMSTREAM_OPS_PORT')));
  });

  it('the ConfigMap points at the chart releases the runbook installs', () => {
    const cmap = named(objs(), 'ConfigMap', 'memstream-config')!.data as Record<string, string>;
    for (const [key, release] of [['NATS_URL', 'nats'], ['QDRANT_URL', 'qdrant']] as const) {
      const host = new URL(cmap[key]!).hostname.split('.');
      expect(host[0], key).toBe(release);
      if (host.length > 1) expect(host[1], `${key} namespace`).toBe(namespace);
    }
  });
});

describe('autoscaling (overlays/production)', () => {
  const objs = () => builds.production!;

  it('the gateway has an HPA; every worker a KEDA ScaledObject on its own consumers of DOCS', () => {
    const hpa = byKind(objs(), 'HorizontalPodAutoscaler');
    expect(hpa.map((h) => h.spec.scaleTargetRef.name)).toEqual(['memstream-gateway']);
    expect(hpa[0]!.spec.minReplicas).toBeGreaterThanOrEqual(2);

    const natsValues = parse(read(path.join(DEPLOY, 'helm', 'nats-values.yaml'))) as K8sObject;
    const sos = byKind(objs(), 'ScaledObject');
    expect(sos.map((s) => s.spec.scaleTargetRef.name).sort()).toEqual(WORKERS.map((w) => `memstream-${w}`).sort());
    for (const so of sos) {
      const d = named(objs(), 'Deployment', so.spec.scaleTargetRef.name);
      expect(d, so.metadata.name).toBeDefined();
      const service = serviceOf(d!);
      const want = pullsFrom(service);
      expect(want.length, `services/${service}/src/main.ts names its consumers`).toBeGreaterThan(0);
      expect(want.join(' '), `${service}: its consumers are in CONSUMERS`).not.toContain('unknown consumer');
      const triggers = so.spec.triggers as K8sObject[];
      expect(triggers.map((t) => `${t.metadata.stream}/${t.metadata.consumer}`).sort(), `${service} triggers`).toEqual(want);
      expect(so.spec.minReplicaCount, so.metadata.name).toBeGreaterThanOrEqual(1);
      expect(so.spec.maxReplicaCount).toBeGreaterThan(so.spec.minReplicaCount);
      for (const t of triggers) {
        expect(t.type).toBe('nats-jetstream');
        expect(t.metadata.account).toBe('$G');
        // The chart's headless Service, in the namespace the ScaledObject lands in, on the chart's monitor port.
        expect(t.metadata.natsServerMonitoringEndpoint).toBe(`nats-headless.${so.metadata.namespace}.svc.cluster.local:${natsValues.config.monitor.port}`);
        expect(Number(t.metadata.lagThreshold)).toBeGreaterThan(0);
      }
    }
  });

  it('the runbook\'s scaling table says what the production build does', () => {
    const runbook = read(path.join(ROOT, 'docs', 'runbook.md'));
    const section = runbook.slice(runbook.indexOf('## Scale'), runbook.indexOf('## Replay'));
    const rows = [...section.matchAll(/^\| (\w+) \| [^|]+ \| ([\d /%]+) \| (\d+)–(\d+) \|/gm)];
    expect(rows.map((r) => r[1]).sort()).toEqual([...SERVICES].sort());
    for (const [, service, threshold, floor, ceiling] of rows) {
      if (service === 'gateway') {
        const hpa = named(objs(), 'HorizontalPodAutoscaler', 'memstream-gateway')!;
        expect([hpa.spec.minReplicas, hpa.spec.maxReplicas], 'gateway').toEqual([Number(floor), Number(ceiling)]);
        expect(`${hpa.spec.metrics[0].resource.target.averageUtilization} %`).toBe(threshold!.trim());
        continue;
      }
      const so = named(objs(), 'ScaledObject', `memstream-${service}`)!;
      expect([so.spec.minReplicaCount, so.spec.maxReplicaCount], service).toEqual([Number(floor), Number(ceiling)]);
      expect((so.spec.triggers as K8sObject[]).map((t) => t.metadata.lagThreshold).join(' / '), service).toBe(threshold!.trim());
    }
  });

  it('replica ceilings stay within each consumer\'s max_ack_pending', async () => {
    const { DEFAULT_POLICIES } = await import('@memstream/bus');
    for (const so of byKind(objs(), 'ScaledObject')) {
      const d = named(objs(), 'Deployment', so.spec.scaleTargetRef.name)!;
      const s = serviceOf(d);
      const conc = Number(envValue(objs(), d, `${s.toUpperCase()}_CONCURRENCY`) ?? 1);
      for (const k of consumersOf(s)) {
        const policy = (DEFAULT_POLICIES as Record<string, { maxAckPending: number }>)[k];
        if (policy) expect(so.spec.maxReplicaCount * conc, `${s}: replicas × concurrency ≤ max_ack_pending of ${k}`).toBeLessThanOrEqual(policy.maxAckPending);
      }
    }
  });
});

describe('deploy/k8s/jobs/replay.yaml (applied by hand, outside the kustomizations)', () => {
  const job = () => loadDocs(path.join(K8S, 'jobs', 'replay.yaml'))[0]!;

  it('validates, runs a replay the CLI knows, with variables the CLI reads and keys the stores provide', async () => {
    const j = job();
    validate(j);
    const c = j.spec.template.spec.containers[0] as K8sObject;
    expect(existsSync(path.join(ROOT, c.args[0])), c.args[0]).toBe(true);
    expect(c.args[1]).toBe('replay');
    const { REPLAY_USAGE } = (await import(pathToFileURL(path.join(ROOT, 'packages', 'cli', 'src', 'replay-commands.ts')).href)) as { REPLAY_USAGE: Record<string, string> };
    expect(Object.keys(REPLAY_USAGE), 'replay targets in packages/cli/src/replay-commands.ts').toContain(c.args[2]);
    const { Config: CliConfig } = (await import(pathToFileURL(path.join(ROOT, 'packages', 'cli', 'src', 'config.ts')).href)) as { Config: { shape: Record<string, unknown> } };
    const { embedderEnv } = (await import(pathToFileURL(path.join(ROOT, 'packages', 'embedder', 'src', 'env.ts')).href)) as { embedderEnv: Record<string, unknown> };
    const allowed = new Set([...Object.keys(CliConfig.shape), ...Object.keys(embedderEnv)]);
    const cmap = named(builds.production!, 'ConfigMap', 'memstream-config')!.data as Record<string, string>;
    const runbook = read(path.join(ROOT, 'docs', 'runbook.md'));
    for (const e of c.env as K8sObject[]) {
      expect(allowed.has(e.name), `the CLI reads ${e.name}`).toBe(true);
      const cm = e.valueFrom?.configMapKeyRef;
      if (cm && !cm.optional) expect(Object.keys(cmap), `ConfigMap key ${cm.key}`).toContain(cm.key);
      const sec = e.valueFrom?.secretKeyRef;
      if (sec) expect(runbook, `runbook's secret has ${sec.key}`).toContain(`${sec.key}=`);
    }
    // The production policies let it reach the stores and the embedding API.
    const labels = j.spec.template.metadata.labels as Record<string, string>;
    const pols = byKind(builds.production!, 'NetworkPolicy').filter((p) => selects(p.spec.podSelector, labels)).map((p) => p.metadata.name);
    expect(pols).toEqual(expect.arrayContaining(['memstream-default-deny', 'memstream-egress-stores', 'memstream-egress-embedding-api']));
    expect(c.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(j.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
  });
});

describe('docs/runbook.md guarantees', () => {
  it('every metric its Metrics section names is one packages/telemetry defines', () => {
    const all = read(path.join(ROOT, 'docs', 'runbook.md'));
    const runbook = all.slice(all.indexOf('## Metrics'), all.indexOf('## Guarantees'));
    const telemetry = sourceText('packages/telemetry/src');
    const names = new Set([...runbook.matchAll(/`(memstream_[a-z_]+?)(?:_bucket)?`/g)].map((m) => m[1]!));
    expect(names.size).toBeGreaterThan(5);
    for (const n of names) expect(telemetry, n).toContain(`'${n}'`);
  });

  it('the delivery-settings table matches DEFAULT_POLICIES for every DOCS consumer', async () => {
    const { DEFAULT_POLICIES } = await import('@memstream/bus');
    const runbook = read(path.join(ROOT, 'docs', 'runbook.md'));
    const rows = new Map<string, number[]>();
    for (const m of runbook.matchAll(/^\| ([\w, -]+) \| DOCS[^|]* \| (\d+) s \| (\d+) \| ([\d ]+) \|$/gm)) {
      for (const durable of m[1]!.split(/,\s*/)) rows.set(durable.trim(), [Number(m[2]) * 1000, Number(m[3]), Number(m[4]!.replace(/\s/g, ''))]);
    }
    for (const [key, c] of Object.entries(CONSUMERS)) {
      const p = (DEFAULT_POLICIES as Record<string, { ackWaitMs: number; maxDeliver: number; maxAckPending: number }>)[key]!;
      expect(rows.get(c.durable), `runbook row for ${c.durable}`).toEqual([p.ackWaitMs, p.maxDeliver, p.maxAckPending]);
      if (c.bulkDurable) expect(rows.get(c.bulkDurable), `runbook row for ${c.bulkDurable}`).toEqual([p.ackWaitMs, p.maxDeliver, p.maxAckPending]);
    }
  });
});

describe('chart values (deploy/helm; no chart schemas offline: the keys memstream relies on)', () => {
  const values = (f: string) => parse(read(path.join(DEPLOY, 'helm', f))) as K8sObject;

  it('NATS: a 3-node JetStream cluster on file storage, fsync always, monitoring on', () => {
    const v = values('nats-values.yaml');
    expect(v.config.cluster).toMatchObject({ enabled: true, replicas: 3 });
    expect(v.config.jetstream).toMatchObject({ enabled: true, fileStore: { enabled: true, pvc: { enabled: true } }, merge: { sync_interval: 'always' } });
    expect(v.config.monitor.enabled).toBe(true);
    // the DOCS stream's max_msg_size is 1 MiB: the server must accept payloads that big
    expect(v.config.merge.max_payload).toBeGreaterThanOrEqual(1024 * 1024);
  });

  it('MongoDB: a replica set named as in MONGODB_URL, no arbiter', () => {
    const v = values('mongodb-values.yaml');
    expect(v.architecture).toBe('replicaset');
    expect(v.replicaCount).toBeGreaterThanOrEqual(3);
    expect(v.arbiter.enabled).toBe(false);
    expect(v.auth.usernames).toEqual(['memstream']);
    const dev = read(path.join(K8S, 'overlays', 'dev', 'kustomization.yaml'));
    expect(dev).toContain(`replicaSet=${v.replicaSetName}`);
  });

  it('Qdrant: distributed, persistent', () => {
    const v = values('qdrant-values.yaml');
    expect(v.replicaCount).toBeGreaterThanOrEqual(3);
    expect(v.config.cluster.enabled).toBe(true);
    expect(v.persistence.size).toMatch(/Gi$/);
  });
});

describe('deploy/docker/Dockerfile (no Docker engine here: checked as text)', () => {
  const text = read(path.join(DEPLOY, 'docker', 'Dockerfile'));
  // Instructions with their continuation lines joined, comments dropped.
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: Array<{ from: string; lines: string[] }> = [];
  for (const l of lines) {
    if (/^FROM /i.test(l)) stages.push({ from: l, lines: [] });
    else stages.at(-1)?.lines.push(l);
  }
  const runtime = stages.at(-1)!;
  const args = Object.fromEntries(lines.filter((l) => /^ARG \w+=/.test(l)).map((l) => l.slice(4).split('=') as [string, string]));

  it('is multi-stage, ends non-root with a numeric uid, and runs the services through tsx', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const user = runtime.lines.filter((l) => l.startsWith('USER ')).at(-1)?.slice(5) ?? '';
    expect(user, 'USER uid:gid').toMatch(/^[1-9]\d*(:\d+)?$/);
    const entry = runtime.lines.find((l) => l.startsWith('ENTRYPOINT '))!;
    expect(JSON.parse(entry.slice(11))).toEqual(['/usr/bin/tini', '--', 'node', '--import', 'tsx']);
    const cmd = JSON.parse(runtime.lines.find((l) => l.startsWith('CMD '))!.slice(4)) as string[];
    expect(existsSync(path.join(ROOT, cmd[0]!)), cmd[0]).toBe(true);
    // tsx is a devDependency: the install must keep dev dependencies.
    const rootPkg = JSON.parse(read(path.join(ROOT, 'package.json'))) as { devDependencies: Record<string, string>; engines: { node: string } };
    expect(rootPkg.devDependencies.tsx).toBeDefined();
    const install = lines.find((l) => /pnpm install/.test(l))!;
    expect(install).toMatch(/--frozen-lockfile/);
    expect(install).not.toMatch(/--prod\b|--production\b/);
    // Node 20 as the engines field asks.
    expect(args.NODE_IMAGE).toMatch(/^node:20[-.]/);
    expect(rootPkg.engines.node).toMatch(/^>=20\./);
    expect(text).toMatch(/EXPOSE 8787 9464/);
  });

  it('copies only files that exist, and installs what the launcher installs', () => {
    for (const l of lines.filter((x) => x.startsWith('COPY ') && !x.includes('--from='))) {
      const parts = l.split(/\s+/).slice(1).filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) expect(existsSync(path.join(ROOT, src)), `COPY ${src}`).toBe(true);
    }
    expect(args.PNPM_VERSION, 'pnpm version as in ./memstream').toBe(launcherVar('PNPM_VERSION'));
    const build = stages[0]!.lines.join('\n');
    expect(build).toMatch(/ONNXRUNTIME_NODE_INSTALL=skip/);
    expect(build).toMatch(/npm_config_nodedir=/);
    const buildWords = build.split(/\s+/);
    for (const tool of ['python3', 'make', 'g++']) expect(buildWords, `build tool ${tool}`).toContain(tool);
    const debs = launcherVar('RUNTIME_DEBS').split(/\s+/).filter(Boolean);
    expect(debs.length).toBeGreaterThan(0);
    const apt = runtime.lines.find((l) => l.includes('apt-get install'))!;
    for (const p of debs) expect(apt.split(/\s+/), `runtime package ${p}`).toContain(p);
    // OCR data is an npm dependency of the extractor, not a Debian package.
    const extractorPkg = JSON.parse(read(path.join(ROOT, 'services', 'extractor', 'package.json'))) as { dependencies: Record<string, string> };
    expect(extractorPkg.dependencies['@tesseract.js-data/eng']).toBeDefined();
    const ignore = read(path.join(DEPLOY, 'docker', 'Dockerfile.dockerignore'));
    for (const p of ['**/node_modules', '.git', '.memstream']) expect(ignore.split('\n')).toContain(p);
  });
});

describe('deploy/compose.yaml (no Docker engine here: checked as data)', () => {
  const compose = () => loadDocs(path.join(DEPLOY, 'compose.yaml'))[0]!;

  it('runs every service from the one image, with variables the service reads', () => {
    const c = compose();
    const services = c.services as Record<string, K8sObject>;
    for (const s of SERVICES) {
      const svc = services[s];
      expect(svc, `compose service ${s}`).toBeDefined();
      expect(svc!.image).toBe('memstream:local');
      expect(svc!.build.dockerfile).toBe('deploy/docker/Dockerfile');
      expect(existsSync(path.join(DEPLOY, svc!.build.context, svc!.build.dockerfile))).toBe(true);
      expect(svc!.command).toEqual([`services/${s}/src/main.ts`]);
      expect(svc!.read_only).toBe(true);
      const problems = Object.keys(svc!.environment ?? {})
        .map((k) => envProblem(s, k))
        .filter(Boolean);
      expect(problems, s).toEqual([]);
      for (const dep of Object.keys(svc!.depends_on ?? {})) expect(services[dep], `${s} depends on ${dep}`).toBeDefined();
      // The health check asks the port the service serves /readyz on.
      const port = s === 'gateway' ? svc!.environment.MEMSTREAM_PORT : svc!.environment.MEMSTREAM_OPS_PORT;
      expect(svc!.healthcheck.test.join(' '), s).toContain(`127.0.0.1:${port}/readyz`);
      if (svc!.environment.MONGODB_URL) expect(svc!.environment.MONGODB_URL).toMatch(/replicaSet=rs0/);
    }
    expect(services.mongodb!.command).toEqual(['--replSet', 'rs0', '--bind_ip_all']);
    expect(services.mongodb!.healthcheck.test.join(' ')).toContain("host: 'mongodb:27017'");
    for (const v of services.nats!.volumes as string[]) {
      const src = v.split(':')[0]!;
      if (src.startsWith('.')) expect(existsSync(path.join(DEPLOY, src)), src).toBe(true);
    }
  });

  it('nats.conf: JetStream on file storage with fsync always, monitoring on', () => {
    const conf = read(path.join(DEPLOY, 'nats.conf'));
    expect(conf).toMatch(/sync_interval:\s*always/);
    expect(conf).toMatch(/store_dir:\s*\/data/);
    expect(conf).toMatch(/http_port:\s*8222/);
  });
});
