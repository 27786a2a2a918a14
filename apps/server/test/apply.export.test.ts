// GET /api/apply/export and POST /api/apply?dry_run=true against a real PostgreSQL: the
// console's export and its import diff.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { compileManifests } from '../../cli/src/manifest.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

const SECRET = 'export-secret-value-0123456789';

type Result = {
  kind: string;
  name: string;
  action: string;
  id: string | null;
  secrets?: Record<string, string>;
};

async function apply(user: TestUser, resources: unknown[], dryRun = false) {
  const res = await t.app.inject({
    method: 'POST',
    url: `/api/apply${dryRun ? '?dry_run=true' : ''}`,
    headers: user.auth,
    payload: { resources },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as { results: Result[]; summary: Record<string, number> };
}

async function exportOf(user: TestUser) {
  const res = await t.app.inject({ url: '/api/apply/export', headers: user.auth });
  assert.equal(res.statusCode, 200, res.body);
  return { raw: res.body, documents: res.json().documents as Array<Record<string, unknown>> };
}

const manifest = (): Array<{ kind: string; name: string; spec: Record<string, unknown> }> => [
  {
    kind: 'Agent',
    name: 'reviewer',
    spec: {
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      environment: 'web',
      vaults: ['prod'],
      system: 'Review carefully.',
      skills: [{ name: 'lint', content: '# Lint\nRun the linter.' }],
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
      setup_script: 'npm ci\n',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['github.com', '*.npmjs.org'] },
      secrets: { GITHUB_TOKEN: SECRET },
    },
  },
  {
    kind: 'Vault',
    name: 'prod',
    spec: { metadata: { tier: 'prod' }, secrets: { API_TOKEN: `${SECRET}-v` } },
  },
];

async function countRows(user: TestUser) {
  const count = async (table: 'environments' | 'vaults' | 'agents' | 'secrets' | 'audit_events') =>
    Number(
      (
        await t.deps.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .where('tenant_id', '=', user.id)
          .executeTakeFirstOrThrow()
      ).n,
    );
  return {
    environments: await count('environments'),
    vaults: await count('vaults'),
    agents: await count('agents'),
    secrets: await count('secrets'),
    audit: await count('audit_events'),
  };
}

describe('apply dry run', () => {
  it('reports what the apply will do, resources of the same manifest included, and changes nothing', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const before = await countRows(user);
    const plan = await apply(user, manifest(), true);
    assert.deepEqual(
      plan.results.map((r) => [r.kind, r.name, r.action, r.id]),
      [
        ['Agent', 'reviewer', 'created', null],
        ['Environment', 'web', 'created', null],
        ['Vault', 'prod', 'created', null],
      ],
    );
    assert.deepEqual(plan.results[1]!.secrets, { GITHUB_TOKEN: 'created' });
    assert.deepEqual(await countRows(user), before, 'no row written, no audit event');

    const applied = await apply(user, manifest());
    assert.deepEqual(
      applied.results.map((r) => r.action),
      ['created', 'created', 'created'],
    );

    const changed = manifest();
    (changed[1]!.spec as { secrets: Record<string, string> }).secrets['GITHUB_TOKEN'] = 'rotated';
    (changed[0]!.spec as { runtime: string }).runtime = 'opencode';
    changed.push({ kind: 'Agent', name: 'broken', spec: { model: 'nope', runtime: 'claude' } });
    const after1 = await countRows(user);
    const diff = await apply(user, changed, true);
    assert.deepEqual(
      diff.results.map((r) => r.action),
      ['updated', 'updated', 'unchanged', 'error'],
    );
    assert.deepEqual(diff.results[1]!.secrets, { GITHUB_TOKEN: 'updated' });
    assert.equal(diff.results[0]!.id, applied.results[0]!.id);
    assert.deepEqual(await countRows(user), after1);
    const agent = await t.app.inject({ url: `/api/agents/${applied.results[0]!.id}`, headers: user.auth });
    assert.equal(agent.json().runtime, 'claude', 'the dry run left the agent as it was');
    const merged = await t.deps.secrets.decryptOwner(user.id, {
      kind: 'environment',
      id: applied.results[1]!.id!,
    });
    assert.equal(merged['GITHUB_TOKEN'], SECRET);
  });
});

describe('export', () => {
  it('answers the account’s resources as manifest documents with ${env:KEY} placeholders, never a value', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const other = await createVerifiedUser(t.deps.db);
    await apply(user, manifest());
    await apply(other, [{ kind: 'Vault', name: 'someone-elses', spec: {} }]);

    const { raw, documents } = await exportOf(user);
    assert.ok(!raw.includes(SECRET), 'no secret value in the export');
    assert.deepEqual(
      documents.map((d) => [d['apiVersion'], d['kind'], (d['metadata'] as { name: string }).name]),
      [
        ['paddock/v1', 'Environment', 'web'],
        ['paddock/v1', 'Vault', 'prod'],
        ['paddock/v1', 'Agent', 'reviewer'],
      ],
    );
    const env = documents[0]!['spec'] as Record<string, unknown>;
    assert.deepEqual(env['secrets'], [{ key: 'GITHUB_TOKEN', value: '${env:GITHUB_TOKEN}' }]);
    const agent = documents[2]!['spec'] as Record<string, unknown>;
    assert.equal(agent['environment'], 'web');
    assert.deepEqual(agent['vaults'], ['prod']);
    assert.ok(!JSON.stringify(agent).includes('environment_id'));

    assert.deepEqual(
      (await exportOf(other)).documents.map((d) => (d['metadata'] as { name: string }).name),
      ['someone-elses'],
    );
    assert.equal((await t.app.inject({ url: '/api/apply/export' })).statusCode, 401);
  });

  it('re-applies as all unchanged: through the CLI’s manifest compiler with the secrets from the environment, and without them', async () => {
    const user = await createVerifiedUser(t.deps.db);
    await apply(user, manifest());
    const { documents } = await exportOf(user);
    const yamlText = documents.map((d) => stringify(d)).join('---\n');

    const withSecrets = compileManifests([{ path: 'export.yaml', text: yamlText }], {
      GITHUB_TOKEN: SECRET,
      API_TOKEN: `${SECRET}-v`,
    });
    const again = await apply(user, withSecrets.resources);
    assert.deepEqual(again.summary, { created: 0, updated: 0, unchanged: 3, error: 0 });

    // The console leaves out secrets whose placeholder was not filled in: stored values stay.
    const withoutSecrets = documents.map((d) => {
      const { secrets: _s, ...spec } = d['spec'] as Record<string, unknown>;
      return { kind: d['kind'], name: (d['metadata'] as { name: string }).name, spec };
    });
    const plain = await apply(user, withoutSecrets);
    assert.deepEqual(plain.summary, { created: 0, updated: 0, unchanged: 3, error: 0 });
  });
});
