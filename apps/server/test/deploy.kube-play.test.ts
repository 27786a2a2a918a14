// The Kubernetes manifests (deploy/k8s/base) run for real with `podman kube play`: the images are
// built (scripts/build-images.sh from the self-made base: no registry here), the server, sandboxd and
// PostgreSQL workloads are rendered into one pod each and played, then a user registers through the
// API and runs a conversation with the scripted runtime, and everything played is torn down.
//
// What the render step changes, and why (kube play plays Pods, not Deployments or Services):
// - each Deployment/StatefulSet becomes one Pod named after it (the server's 2 replicas: one pod);
//   volumeClaimTemplates become PersistentVolumeClaims (podman volumes);
// - Services become hostAliases: every pod resolves the Service names to the pods' fixed addresses
//   on a network of this test's own;
// - secretKeyRef/configMapKeyRef become literal values (this test's throw-away secrets);
// - the images are the ones just built; postgres:17 is localhost/paddock-postgres:17;
// - the server runs the `serve` boot with the scripted runtime (test/fixtures/serve-scripted.ts,
//   mounted read-only) instead of the real agent CLIs, and sandboxd runs without the runtime layer
//   (SANDBOXD_RUNTIME_LAYER=off: the layer is 1.5 GB of agent CLIs the scripted runtime does not use).
// Everything else (probes, securityContext, privileged sandboxd, volumes, env) is played as written.
//
// Needs podman (scripts/ci-system-deps.sh installs it) and root. A missing podman fails the test;
// only an ordinary user outside CI gets it skipped, with the reason (helpers/podman.ts). The built images stay (the build cache) but older `sha-*`
// tags go (helpers/podman.ts); pods, containers, volumes and the network go.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments, stringify } from 'yaml';
import {
  buildImages,
  containerLogs,
  podman,
  podmanUnavailable,
  ROOT,
  registerAndConverse,
  until,
} from './helpers/podman.ts';

const K8S = join(ROOT, 'deploy/k8s/base');
const NETWORK = 'paddock-kube-test';
const SUBNET_PREFIX = '10.89.77';
const ADDRESSES: Record<string, string> = {
  'paddock-postgres': `${SUBNET_PREFIX}.10`,
  'paddock-sandboxd': `${SUBNET_PREFIX}.11`,
  'paddock-server': `${SUBNET_PREFIX}.12`,
};
const ORDER = ['paddock-postgres', 'paddock-sandboxd', 'paddock-server'];

const missing = podmanUnavailable('deploy.kube-play.test.ts');

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes documents are free-form YAML trees.
type Doc = any;

function loadDocs(file: string): Doc[] {
  return parseAllDocuments(readFileSync(join(K8S, file), 'utf8')).map((d) => d.toJS());
}

interface RenderInput {
  images: Record<string, string>;
  secrets: Record<string, string>;
  config: Record<string, string>;
  claimPrefix: string;
}

/** One workload (Deployment/StatefulSet) → [its PVCs…, one Pod], as described at the top. */
function renderWorkload(workload: Doc, input: RenderInput): Doc[] {
  const name: string = workload.metadata.name;
  const template = structuredClone(workload.spec.template);
  const spec = template.spec;
  const out: Doc[] = [];
  spec.volumes ??= [];
  for (const claim of workload.spec.volumeClaimTemplates ?? []) {
    const claimName = `${input.claimPrefix}-${name}-${claim.metadata.name}`;
    out.push({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: claimName },
      spec: claim.spec,
    });
    spec.volumes.push({ name: claim.metadata.name, persistentVolumeClaim: { claimName } });
  }
  spec.hostAliases = Object.entries(ADDRESSES).map(([host, ip]) => ({ ip, hostnames: [host] }));
  for (const c of spec.containers) {
    c.image = input.images[c.image] ?? assert.fail(`no image built for ${c.image}`);
    c.env = (c.env ?? []).map((e: Doc) => {
      const secret = e.valueFrom?.secretKeyRef;
      const config = e.valueFrom?.configMapKeyRef;
      if (secret) return { name: e.name, value: input.secrets[secret.key] ?? assert.fail(secret.key) };
      if (config) return { name: e.name, value: input.config[config.key] ?? assert.fail(config.key) };
      return e;
    });
  }
  if (name === 'paddock-server') {
    const server = spec.containers[0];
    server.command = ['node', 'apps/server/test/fixtures/serve-scripted.ts'];
    server.args = [];
    server.volumeMounts.push({
      name: 'fixtures',
      mountPath: '/app/apps/server/test/fixtures',
      readOnly: true,
    });
    spec.volumes.push({
      name: 'fixtures',
      hostPath: { path: join(ROOT, 'apps/server/test/fixtures'), type: 'Directory' },
    });
  }
  if (name === 'paddock-sandboxd') {
    const env = spec.containers[0].env as Doc[];
    env.find((e) => e.name === 'SANDBOXD_RUNTIME_LAYER').value = 'off';
  }
  out.push({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: template.metadata.labels, annotations: template.metadata.annotations ?? {} },
    spec,
  });
  return out;
}

describe('deploy/k8s with podman kube play', { skip: missing || false }, () => {
  const work = mkdtempSync(join(tmpdir(), 'paddock-test-kube-'));
  const claimPrefix = `kt${randomBytes(3).toString('hex')}`;
  const played: string[] = [];
  const base = `http://${ADDRESSES['paddock-server']}:4000`;

  const logsOf = (pod: string, container: string) => containerLogs(`${pod}-${container}`);

  before(async () => {
    // Leftovers of an interrupted earlier run.
    for (const pod of ORDER) await podman(['pod', 'rm', '-f', '--ignore', pod]).catch(() => '');
    await podman(['network', 'rm', '-f', NETWORK]).catch(() => '');
    await podman(['network', 'create', '--subnet', `${SUBNET_PREFIX}.0/24`, NETWORK]);
  });

  after(async () => {
    for (const pod of played.reverse()) await podman(['pod', 'rm', '-f', '-t', '5', pod]).catch(() => '');
    const volumes = (await podman(['volume', 'ls', '-q']).catch(() => ''))
      .split('\n')
      .filter((v) => v.startsWith(`${claimPrefix}-`));
    if (volumes.length > 0) await podman(['volume', 'rm', '-f', ...volumes]).catch(() => '');
    await podman(['network', 'rm', '-f', NETWORK]).catch(() => '');
    rmSync(work, { recursive: true, force: true });
  });

  it('builds the images, plays the manifests, and a registered user runs a conversation', async () => {
    // 1. The images, from the base this machine makes (cached after the first run).
    const { images } = await buildImages();
    const imageMap = {
      'paddock-server': images['paddock-server']!,
      'paddock-sandboxd': images['paddock-sandboxd']!,
      'postgres:17': images['paddock-postgres']!,
    };
    // The Containerfile's promises: non-root server with a health check.
    const inspect = JSON.parse(await podman(['image', 'inspect', imageMap['paddock-server']]))[0];
    assert.equal(inspect.Config.User, '10001:10001');
    assert.match(JSON.stringify(inspect.Healthcheck ?? inspect.Config?.Healthcheck ?? null), /\/health/);

    // 2. Render and play: PostgreSQL, sandboxd, the server.
    const password = randomBytes(18).toString('base64url');
    const secrets = {
      MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
      SECRET_KEY_BASE: randomBytes(32).toString('base64url'),
      SANDBOX_TOKEN: randomBytes(24).toString('base64url'),
      POSTGRES_PASSWORD: password,
      DATABASE_URL: `postgres://paddock:${password}@paddock-postgres:5432/paddock`,
    };
    const config = { PUBLIC_URL: base, SERVICE_IMAGE_TAG: 'kube-play-test', EMAIL_DELIVERY: 'none' };
    const workloads = ['postgres.yaml', 'sandboxd.yaml', 'server.yaml']
      .flatMap(loadDocs)
      .filter((d) => d.kind === 'Deployment' || d.kind === 'StatefulSet');
    const server = workloads.find((w) => w.metadata.name === 'paddock-server');
    // The manifest's promises that kube play cannot show: replicas, grace period, probes, the Service.
    assert.equal(server.spec.replicas, 2);
    assert.equal(server.spec.template.spec.terminationGracePeriodSeconds, 120);
    assert.equal(server.spec.template.spec.containers[0].readinessProbe.httpGet.path, '/health/ready');
    assert.equal(server.spec.template.spec.containers[0].livenessProbe.httpGet.path, '/health');
    const services = loadDocs('server.yaml').filter((d) => d.kind === 'Service');
    assert.deepEqual(
      services.flatMap((s) => s.spec.ports.map((p: Doc) => p.targetPort)),
      ['http'],
      'no Service exposes the metrics port',
    );

    for (const name of ORDER) {
      const workload = workloads.find((w) => w.metadata.name === name);
      assert.ok(workload, `deploy/k8s/base has a workload ${name}`);
      const docs = renderWorkload(workload, { images: imageMap, secrets, config, claimPrefix });
      const file = join(work, `${name}.yaml`);
      writeFileSync(file, docs.map((d) => stringify(d)).join('---\n'));
      await podman(['kube', 'play', '--network', NETWORK, '--ip', ADDRESSES[name]!, file], 300_000);
      played.push(name);
    }

    // 3. Ready: the readiness probe's own URL.
    await until('GET /health/ready answers 200', 240_000, async () => {
      const res = await fetch(`${base}/health/ready`, { signal: AbortSignal.timeout(3000) });
      return res.status === 200 ? true : undefined;
    }).catch(async (err: Error) => {
      throw new Error(
        `${err.message}\nserver log:\n${await logsOf('paddock-server', 'server')}\npostgres log:\n${await logsOf('paddock-postgres', 'postgres')}`,
      );
    });
    // The private listener answers /health inside the pod (the liveness probe's port). It starts
    // just after the public one, so /health/ready can answer before it listens.
    await until('GET :9568/health answers 200', 60_000, async () => {
      const res = await fetch(`http://${ADDRESSES['paddock-server']}:9568/health`, {
        signal: AbortSignal.timeout(3000),
      });
      return res.status === 200 ? true : undefined;
    });

    // 4. Register, sign in with a key, make an agent, run a conversation.
    await registerAndConverse({
      base,
      words: 'kube play',
      logs: async () =>
        `server log:\n${await logsOf('paddock-server', 'server')}\nsandboxd log:\n${await logsOf('paddock-sandboxd', 'sandboxd')}`,
    });
  });
});
