// POST /api/apply against a real PostgreSQL.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

type Result = {
  kind: string;
  name: string;
  action: string;
  id: string | null;
  errors?: Record<string, string[]>;
  secrets?: Record<string, string>;
};

async function apply(user: TestUser, resources: unknown[]) {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/apply',
    headers: user.auth,
    payload: { resources },
  });
  return {
    status: res.statusCode,
    raw: res.body,
    body: res.json() as { results: Result[]; summary: Record<string, number> },
  };
}

const SECRET = 'apply-secret-value-0123456789';

const manifest = () => [
  // Deliberately out of order: the agent first, its environment and vault after.
  {
    kind: 'Agent',
    name: 'reviewer',
    spec: {
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      environment: 'web',
      vaults: ['prod'],
      skills: [{ source: 'acme/skills', ref: 'v1' }],
      mcp_servers: { gh: { command: 'npx', args: ['-y', 'gh-mcp'], env: { TOKEN: '${GITHUB_TOKEN}' } } },
    },
  },
  {
    kind: 'Environment',
    name: 'web',
    spec: {
      env_vars: { NODE_ENV: 'test' },
      packages: { npm: 'typescript@5.4.5' },
      repos: [{ url: 'https://github.com/acme/web.git', ref: 'main', token_secret: 'GITHUB_TOKEN' }],
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['github.com'] },
      secrets: { GITHUB_TOKEN: SECRET, OTHER: 'x' },
    },
  },
  {
    kind: 'Vault',
    name: 'prod',
    spec: { metadata: { tier: 'prod' }, secrets: { GITHUB_TOKEN: `${SECRET}-vault` } },
  },
];

describe('bulk apply', () => {
  it('creates in the fixed order, then reports every resource unchanged on a second identical apply', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const first = await apply(user, manifest());
    assert.equal(first.status, 200, first.raw);
    assert.deepEqual(
      first.body.results.map((r) => [r.kind, r.name, r.action]),
      [
        ['Agent', 'reviewer', 'created'],
        ['Environment', 'web', 'created'],
        ['Vault', 'prod', 'created'],
      ],
    );
    assert.deepEqual(first.body.results[1]!.secrets, { GITHUB_TOKEN: 'created', OTHER: 'created' });
    assert.deepEqual(first.body.summary, { created: 3, updated: 0, unchanged: 0, error: 0 });
    assert.ok(!first.raw.includes(SECRET), 'values are never echoed');

    const agent = await t.app.inject({
      method: 'GET',
      url: `/api/agents/${first.body.results[0]!.id}`,
      headers: user.auth,
    });
    assert.equal(agent.json().environment_id, first.body.results[1]!.id);
    assert.deepEqual(agent.json().vault_ids, [first.body.results[2]!.id]);

    const second = await apply(user, manifest());
    assert.equal(second.status, 200);
    assert.deepEqual(
      second.body.results.map((r) => r.action),
      ['unchanged', 'unchanged', 'unchanged'],
    );
    assert.deepEqual(second.body.results[1]!.secrets, { GITHUB_TOKEN: 'unchanged', OTHER: 'unchanged' });
    assert.deepEqual(
      second.body.results.map((r) => r.id),
      first.body.results.map((r) => r.id),
    );

    // A changed secret value makes its resource "updated"; a changed field likewise.
    const changed = manifest();
    (changed[1]!.spec as { secrets: Record<string, string> }).secrets['OTHER'] = 'y';
    (changed[0]!.spec as { runtime: string }).runtime = 'opencode';
    const third = await apply(user, changed);
    assert.deepEqual(
      third.body.results.map((r) => r.action),
      ['updated', 'updated', 'unchanged'],
    );
    assert.deepEqual(third.body.results[1]!.secrets, { GITHUB_TOKEN: 'unchanged', OTHER: 'updated' });

    const merged = await t.deps.secrets.mergedEnv(user.id, {
      environmentId: first.body.results[1]!.id,
      vaultId: first.body.results[2]!.id,
    });
    assert.deepEqual(merged, { GITHUB_TOKEN: `${SECRET}-vault`, OTHER: 'y' });
    assert.ok(!t.logs.join('').includes(SECRET));

    const audit = await t.deps.db
      .selectFrom('audit_events')
      .select(['type', 'metadata'])
      .where('tenant_id', '=', user.id)
      .where('type', '=', 'apply.completed')
      .execute();
    assert.equal(audit.length, 3);
    assert.ok(!JSON.stringify(audit).includes(SECRET));
  });

  it('is best-effort per resource: errors carry field errors, everything else applies, always 200', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const res = await apply(user, [
      { kind: 'Environment', name: 'bad', spec: { repos: [{ url: 'git@github.com:a/b.git' }] } },
      { kind: 'Environment', name: 'good', spec: {} },
      { kind: 'Agent', name: 'orphan', spec: { model: 'x/y', runtime: 'claude', environment: 'bad' } },
      { kind: 'Agent', name: 'bad-model', spec: { model: 'nope', runtime: 'claude' } },
      { kind: 'Agent', name: 'no-vault', spec: { model: 'x/y', runtime: 'claude', vaults: ['missing'] } },
      { kind: 'Widget', name: 'w', spec: {} },
      { kind: 'Vault', name: 'has space', spec: {} },
      { kind: 'Environment', name: 'good', spec: {} },
      { kind: 'Environment', name: 'bad-secret', spec: { secrets: { '1X': 'v' } } },
      { kind: 'Vault', name: 'v', spec: { unknown: 1 } },
    ]);
    assert.equal(res.status, 200, res.raw);
    const byIndex = res.body.results;
    assert.equal(byIndex[0]!.action, 'error');
    assert.match(byIndex[0]!.errors!['spec.repos.0.url']!.join(), /SSH/);
    assert.equal(byIndex[1]!.action, 'created');
    assert.match(byIndex[2]!.errors!['spec.environment']!.join(), /not found/);
    assert.ok(byIndex[3]!.errors!['spec.model']);
    assert.match(byIndex[4]!.errors!['spec.vaults']!.join(), /missing/);
    assert.ok(byIndex[5]!.errors!['kind']);
    assert.ok(byIndex[6]!.errors!['name']);
    assert.match(byIndex[7]!.errors!['name']!.join(), /twice/);
    assert.ok(byIndex[8]!.errors!['spec.secrets.1X']);
    assert.ok(byIndex[9]!.errors!['spec']);
    assert.deepEqual(res.body.summary, { created: 1, updated: 0, unchanged: 0, error: 9 });
    const envs = await t.app.inject({ method: 'GET', url: '/api/environments', headers: user.auth });
    assert.deepEqual(
      envs.json().data.map((e: { name: string }) => e.name),
      ['good'],
    );
  });

  it('refuses a resource with an invalid secret without writing any part of it', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const res = await apply(user, [
      { kind: 'Environment', name: 'atomic', spec: { secrets: { OK: 'v', BAD: 'a\u0000b' } } },
    ]);
    assert.equal(res.body.results[0]!.action, 'error');
    const envs = await t.app.inject({ method: 'GET', url: '/api/environments', headers: user.auth });
    assert.deepEqual(envs.json().data, []);
  });

  it('refuses a body that is not a list of {kind, name, spec} with 422', async () => {
    const user = await createVerifiedUser(t.deps.db);
    for (const payload of [
      {},
      { resources: 'x' },
      { resources: [1] },
      { resources: [{ kind: 1, name: 'a' }] },
    ]) {
      const res = await t.app.inject({ method: 'POST', url: '/api/apply', headers: user.auth, payload });
      assert.equal(res.statusCode, 422, JSON.stringify(payload));
    }
    const empty = await apply(user, []);
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body.results, []);
  });

  it('refuses a manifest with more than 2000 secrets in all with 422, writing nothing', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const secrets = (prefix: string) =>
      Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`${prefix}_${i}`, 'v']));
    const payload = {
      resources: ['A', 'B', 'C', 'D', 'E'].map((p) => ({
        kind: 'Vault',
        name: `big-${p}`,
        spec: { secrets: secrets(p) },
      })),
    };
    const res = await t.app.inject({ method: 'POST', url: '/api/apply', headers: user.auth, payload });
    assert.equal(res.statusCode, 422);
    assert.ok(res.json().errors.resources?.[0]?.includes('2000'));
    const vaults = await t.app.inject({ url: '/api/vaults', headers: user.auth });
    assert.deepEqual(vaults.json().data, []);
  });
});
