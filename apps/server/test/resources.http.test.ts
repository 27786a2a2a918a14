// Environments, vaults, agents and their secrets over HTTP, against a real PostgreSQL.
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

type Json = Record<string, unknown>;

async function call(user: TestUser, method: string, url: string, payload?: unknown) {
  const res = await t.app.inject({
    method: method as 'GET',
    url,
    headers: user.auth,
    ...(payload === undefined ? {} : { payload: payload as Json }),
  });
  return { status: res.statusCode, body: res.body === '' ? null : (res.json() as Json), raw: res.body };
}

const fullEnvironment = {
  name: 'web-app',
  env_vars: { NODE_ENV: 'development', LOG_LEVEL: 'debug' },
  packages: { apt: 'ripgrep jq', npm: 'typescript@5.4.5', pip: 'requests>=2.31' },
  repos: [
    { url: 'https://github.com/acme/web.git', ref: 'main' },
    { url: 'https://github.com/acme/private.git', token_secret: 'GITHUB_TOKEN' },
  ],
  setup_script: 'npm ci\n',
  networking_type: 'limited',
  networking_config: { allowed_hosts: ['github.com', '*.npmjs.org'] },
  metadata: { team: 'web', nested: { a: [1, 2] } },
};

describe('environments', () => {
  let user: TestUser;
  before(async () => {
    user = await createVerifiedUser(t.deps.db);
  });

  it('creates (201), reads (200), replaces (200) and deletes (204) with every field of the spec', async () => {
    const created = await call(user, 'POST', '/api/environments', fullEnvironment);
    assert.equal(created.status, 201, created.raw);
    const env = created.body!;
    assert.match(String(env['id']), /^[0-9a-f-]{36}$/);
    for (const [k, v] of Object.entries(fullEnvironment)) assert.deepEqual(env[k], v, k);
    assert.equal(env['checkpoint_id'], null);
    assert.equal(env['agent_count'], 0);
    assert.equal(env['secret_count'], 0);
    assert.match(String(env['created_at']), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

    const got = await call(user, 'GET', `/api/environments/${env['id']}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, env);

    const listed = await call(user, 'GET', '/api/environments');
    assert.equal(listed.status, 200);
    assert.deepEqual(
      (listed.body!['data'] as Json[]).map((e) => e['name']),
      ['web-app'],
    );

    // PUT replaces every mutable field: omitted ones return to their defaults.
    const replaced = await call(user, 'PUT', `/api/environments/${env['id']}`, { name: 'web-app-2' });
    assert.equal(replaced.status, 200, replaced.raw);
    assert.equal(replaced.body!['name'], 'web-app-2');
    assert.deepEqual(replaced.body!['repos'], []);
    assert.equal(replaced.body!['networking_type'], 'unrestricted');
    assert.deepEqual(replaced.body!['networking_config'], { allowed_hosts: [] });

    const deleted = await call(user, 'DELETE', `/api/environments/${env['id']}`);
    assert.equal(deleted.status, 204);
    assert.equal(deleted.raw, '');
    assert.equal((await call(user, 'GET', `/api/environments/${env['id']}`)).status, 404);
    assert.equal((await call(user, 'DELETE', `/api/environments/${env['id']}`)).status, 404);
  });

  it('answers 404 for a malformed id', async () => {
    for (const url of [
      '/api/environments/nope',
      '/api/environments/nope/secrets',
      '/api/vaults/1',
      '/api/agents/x',
    ]) {
      const res = await call(user, 'GET', url);
      assert.equal(res.status, 404, url);
      assert.equal(res.body!['error'], 'not_found');
    }
  });

  it('keeps names unique per tenant (409 with a field error), but not across tenants', async () => {
    assert.equal((await call(user, 'POST', '/api/environments', { name: 'dup' })).status, 201);
    const again = await call(user, 'POST', '/api/environments', { name: 'dup' });
    assert.equal(again.status, 409);
    assert.deepEqual(again.body!['errors'], { name: ['is already taken'] });
    const other = await createVerifiedUser(t.deps.db);
    assert.equal((await call(other, 'POST', '/api/environments', { name: 'dup' })).status, 201);
  });

  it('refuses invalid fields with 422 and field errors', async () => {
    const cases: Array<[Json, string, RegExp]> = [
      [{ repos: [{ url: 'http://github.com/a/b.git' }] }, 'repos.0.url', /https/],
      [{ repos: [{ url: 'git@github.com:a/b.git' }] }, 'repos.0.url', /SSH/],
      [{ repos: [{ url: 'ssh://git@github.com/a/b.git' }] }, 'repos.0.url', /SSH/],
      [{ repos: [{ url: 'https://user:pw@github.com/a/b.git' }] }, 'repos.0.url', /credentials/],
      [
        { repos: [{ url: 'https://github.com/a/b.git', token_secret: 'not valid' }] },
        'repos.0.token_secret',
        /environment variable/,
      ],
      [{ env_vars: { '1BAD': 'x' } }, 'env_vars.1BAD', /environment variable name/],
      [{ env_vars: { PADDOCK_TOKEN: 'x' } }, 'env_vars.PADDOCK_TOKEN', /reserved/],
      [{ networking_type: 'open' }, 'networking_type', /./],
      [
        { networking_config: { allowed_hosts: ['not a host'] } },
        'networking_config.allowed_hosts.0',
        /domain/,
      ],
      [{ networking_config: { allowed_hosts: ['*'] } }, 'networking_config.allowed_hosts.0', /domain/],
      [{ packages: { cargo: 'ripgrep' } }, 'packages.cargo', /unsupported package manager/],
      [{ packages: { apt: '--allow-unauthenticated evil' } }, 'packages.apt', /invalid package spec/],
      [{ setup_script: 'x'.repeat(64 * 1024 + 1) }, 'setup_script', /64/],
      [{ name: 'has space' }, 'name', /letters/],
      [{ name: 'x'.repeat(101) }, 'name', /100/],
      [{ unknown_field: 1 }, 'body', /nrecognized/],
    ];
    for (const [patch, field, message] of cases) {
      const res = await call(user, 'POST', '/api/environments', { name: 'valid-name', ...patch });
      assert.equal(res.status, 422, `${JSON.stringify(patch).slice(0, 80)} → ${res.raw.slice(0, 300)}`);
      assert.equal(res.body!['error'], 'validation_failed');
      const errors = res.body!['errors'] as Record<string, string[]>;
      assert.ok(errors[field], `${field} missing in ${JSON.stringify(errors)}`);
      assert.match(errors[field]!.join(' '), message);
    }
  });

  it('accepts a list of package specs per manager (as YAML users write) and stores the string', async () => {
    const created = await call(user, 'POST', '/api/environments', {
      name: 'listed-packages',
      packages: { npm: ['cowsay', 'typescript@5.4.5'], pip: [] },
    });
    assert.equal(created.status, 201, created.raw);
    assert.deepEqual(created.body!['packages'], { npm: 'cowsay typescript@5.4.5', pip: '' });
    // Each listed spec is checked like a spec of the string; a non-string entry is refused.
    const option = await call(user, 'POST', '/api/environments', {
      name: 'listed-bad',
      packages: { npm: ['cowsay', '--registry=http://evil'] },
    });
    assert.equal(option.status, 422, option.raw);
    const errors = option.body!['errors'] as Record<string, string[]>;
    assert.match(String(errors['packages.npm']), /invalid package spec "--registry=http:\/\/evil"/);
    const number = await call(user, 'POST', '/api/environments', {
      name: 'listed-bad',
      packages: { apt: [7] },
    });
    assert.equal(number.status, 422, number.raw);
    assert.ok(
      Object.keys(number.body!['errors'] as object).some((k) => k.startsWith('packages.apt')),
      number.raw,
    );
  });

  it('accepts wildcard hosts and drops networking_config keys other than allowed_hosts', async () => {
    const res = await call(user, 'POST', '/api/environments', {
      name: 'net',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['*.example.com', 'api.github.com'], other: true },
    });
    assert.equal(res.status, 201, res.raw);
    assert.deepEqual(res.body!['networking_config'], { allowed_hosts: ['*.example.com', 'api.github.com'] });
  });
});

describe('secrets of environments and vaults', () => {
  let user: TestUser;
  before(async () => {
    user = await createVerifiedUser(t.deps.db);
  });

  for (const kind of ['environments', 'vaults'] as const) {
    it(`${kind}: upserts (201 then 200), lists keys only, deletes by key, never echoes or logs a value`, async () => {
      const owner = (await call(user, 'POST', `/api/${kind}`, { name: `with-secrets` })).body!;
      const base = `/api/${kind}/${owner['id']}/secrets`;
      const value = `s3cr3t-${kind}-value-${Math.random()}`;
      const created = await call(user, 'POST', base, { key: 'API_TOKEN', value });
      assert.equal(created.status, 201, created.raw);
      assert.deepEqual(Object.keys(created.body!).sort(), [
        'created_at',
        'id',
        'key',
        'outcome',
        'updated_at',
      ]);
      assert.equal(created.body!['outcome'], 'created');
      const same = await call(user, 'POST', base, { key: 'API_TOKEN', value });
      assert.equal(same.status, 200);
      assert.equal(same.body!['outcome'], 'unchanged');
      const changed = await call(user, 'POST', base, { key: 'API_TOKEN', value: `${value}-2` });
      assert.equal(changed.status, 200);
      assert.equal(changed.body!['outcome'], 'updated');
      assert.equal((await call(user, 'POST', base, { key: 'SECOND', value: '' })).status, 201);

      const listed = await call(user, 'GET', base);
      assert.equal(listed.status, 200);
      const data = listed.body!['data'] as Json[];
      assert.deepEqual(
        data.map((s) => s['key']),
        ['API_TOKEN', 'SECOND'],
      );
      for (const s of data)
        assert.deepEqual(Object.keys(s).sort(), ['created_at', 'id', 'key', 'updated_at']);
      assert.equal((await call(user, 'GET', `/api/${kind}/${owner['id']}`)).body!['secret_count'], 2);

      assert.equal((await call(user, 'DELETE', `${base}/SECOND`)).status, 204);
      assert.equal((await call(user, 'DELETE', `${base}/SECOND`)).status, 404);
      assert.equal((await call(user, 'DELETE', `${base}/not%20a%20key`)).status, 404);

      for (const bad of [
        { key: '1BAD', value: 'x' },
        { key: 'A-B', value: 'x' },
        { key: 'OK', value: 'x'.repeat(64 * 1024 + 1) },
        { key: 'OK' },
        { key: 'OK', value: 5 },
        { key: 'OK', value: 'x', extra: 1 },
      ]) {
        const res = await call(user, 'POST', base, bad);
        assert.equal(res.status, 422, JSON.stringify(bad).slice(0, 60));
        assert.ok(!res.raw.includes('x'.repeat(100)), 'a refused value is not echoed');
      }

      const logs = t.logs.join('');
      assert.ok(!logs.includes(value), 'value in logs');
      const audit = await t.deps.db
        .selectFrom('audit_events')
        .select(['type', 'metadata'])
        .where('tenant_id', '=', user.id)
        .where('type', 'like', '%.secret.%')
        .execute();
      const singular = kind === 'environments' ? 'environment' : 'vault';
      assert.deepEqual(audit.map((a) => a.type).sort(), [
        `${singular}.secret.deleted`,
        `${singular}.secret.upserted`,
        `${singular}.secret.upserted`,
        `${singular}.secret.upserted`,
      ]);
      assert.ok(!JSON.stringify(audit).includes(value));
      await t.deps.db.deleteFrom('audit_events').where('tenant_id', '=', user.id).execute();
    });
  }
});

describe('vaults', () => {
  it('CRUD with metadata; deleting a vault removes it from agent allowlists', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const vault = await call(user, 'POST', '/api/vaults', { name: 'prod', metadata: { tier: 1 } });
    assert.equal(vault.status, 201, vault.raw);
    assert.deepEqual(vault.body!['metadata'], { tier: 1 });
    const id = vault.body!['id'] as string;
    const put = await call(user, 'PUT', `/api/vaults/${id}`, { name: 'prod-2' });
    assert.equal(put.status, 200);
    assert.deepEqual(put.body!['metadata'], {});
    const agent = await call(user, 'POST', '/api/agents', {
      name: 'a',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      vault_ids: [id],
    });
    assert.equal(agent.status, 201, agent.raw);
    assert.equal((await call(user, 'GET', `/api/vaults/${id}`)).body!['agent_count'], 1);
    assert.equal((await call(user, 'DELETE', `/api/vaults/${id}`)).status, 204);
    assert.deepEqual((await call(user, 'GET', `/api/agents/${agent.body!['id']}`)).body!['vault_ids'], []);
  });
});

describe('agents', () => {
  let user: TestUser;
  let envId: string;
  let vaultId: string;
  before(async () => {
    user = await createVerifiedUser(t.deps.db);
    envId = (await call(user, 'POST', '/api/environments', { name: 'base' })).body!['id'] as string;
    vaultId = (await call(user, 'POST', '/api/vaults', { name: 'keys' })).body!['id'] as string;
  });

  const agent = {
    name: 'reviewer',
    model: 'anthropic/claude-sonnet-4-5',
    runtime: 'claude',
    system: 'You review pull requests.',
    description: 'Reviews code',
    skills: [
      { name: 'review', content: '---\nname: review\n---\nReview carefully.\n' },
      { source: 'acme/skills', ref: 'v1.2.0' },
    ],
    mcp_servers: { github: { command: 'npx', args: ['-y', '@acme/mcp'], env: { TOKEN: '${GITHUB_TOKEN}' } } },
    metadata: { owner: 'qa' },
  };

  it('creates with every field, counts it on its environment, and filters the list', async () => {
    const created = await call(user, 'POST', '/api/agents', {
      ...agent,
      environment_id: envId,
      vault_ids: [vaultId],
    });
    assert.equal(created.status, 201, created.raw);
    for (const [k, v] of Object.entries(agent)) assert.deepEqual(created.body![k], v, k);
    assert.equal(created.body!['environment_id'], envId);
    assert.deepEqual(created.body!['vault_ids'], [vaultId]);
    assert.equal(created.body!['conversation_count'], 0);
    assert.equal((await call(user, 'GET', `/api/environments/${envId}`)).body!['agent_count'], 1);

    const plain = await call(user, 'POST', '/api/agents', {
      name: 'plain',
      model: 'openai/gpt-5',
      runtime: 'codex',
    });
    assert.equal(plain.status, 201, plain.raw);
    assert.deepEqual(plain.body!['skills'], []);
    assert.equal(plain.body!['environment_id'], null);

    const names = async (query: string) =>
      ((await call(user, 'GET', `/api/agents${query}`)).body!['data'] as Json[]).map((a) => a['name']);
    assert.deepEqual(await names(''), ['plain', 'reviewer']);
    assert.deepEqual(await names('?runtime=codex'), ['plain']);
    assert.deepEqual(await names(`?environment_id=${envId}`), ['reviewer']);
    assert.deepEqual(await names('?environment_id=not-a-uuid'), []);
    assert.deepEqual(await names('?has_skills=true'), ['reviewer']);
    assert.deepEqual(await names('?has_skills=false'), ['plain']);
    assert.deepEqual(await names('?has_mcp=true'), ['reviewer']);
    assert.deepEqual(await names('?search=REVIEWS'), ['reviewer']);
    assert.deepEqual(await names('?search=%25'), []);
    assert.equal((await call(user, 'GET', '/api/agents?runtime=nope')).status, 422);
    assert.equal((await call(user, 'GET', '/api/agents?has_mcp=yes')).status, 422);
  });

  it('refuses to delete an environment used by agents (409), then deletes it once detached', async () => {
    const env = (await call(user, 'POST', '/api/environments', { name: 'busy' })).body!;
    const a = (
      await call(user, 'POST', '/api/agents', {
        name: 'busy-agent',
        model: 'x/y',
        runtime: 'gemini',
        environment_id: env['id'],
      })
    ).body!;
    const refused = await call(user, 'DELETE', `/api/environments/${env['id']}`);
    assert.equal(refused.status, 409);
    assert.equal(refused.body!['error'], 'conflict');
    const detached = await call(user, 'PUT', `/api/agents/${a['id']}`, {
      name: 'busy-agent',
      model: 'x/y',
      runtime: 'gemini',
    });
    assert.equal(detached.status, 200);
    assert.equal(detached.body!['environment_id'], null);
    assert.equal((await call(user, 'DELETE', `/api/environments/${env['id']}`)).status, 204);
  });

  it('answers a foreign or missing environment or vault reference with 404', async () => {
    const other = await createVerifiedUser(t.deps.db);
    const foreignEnv = (await call(other, 'POST', '/api/environments', { name: 'theirs' })).body!['id'];
    const foreignVault = (await call(other, 'POST', '/api/vaults', { name: 'theirs' })).body!['id'];
    const missing = '01900000-0000-7000-8000-000000000000';
    const base = { name: 'refs', model: 'x/y', runtime: 'claude' };
    for (const patch of [
      { environment_id: foreignEnv },
      { environment_id: missing },
      { vault_ids: [foreignVault] },
      { vault_ids: [missing] },
    ]) {
      const res = await call(user, 'POST', '/api/agents', { ...base, ...patch });
      assert.equal(res.status, 404, JSON.stringify(patch));
      assert.equal(res.body!['error'], 'not_found');
    }
    const foreignBody = await call(user, 'POST', '/api/agents', { ...base, environment_id: foreignEnv });
    const missingBody = await call(user, 'POST', '/api/agents', { ...base, environment_id: missing });
    assert.deepEqual(foreignBody.body, missingBody.body);
  });

  it('refuses invalid fields with 422 and field errors', async () => {
    const base = { name: 'v', model: 'anthropic/claude', runtime: 'claude' };
    const cases: Array<[Json, string]> = [
      [{ runtime: 'gpt' }, 'runtime'],
      [{ model: 'claude-sonnet' }, 'model'],
      [{ model: '/x' }, 'model'],
      [{ model: 'a/' }, 'model'],
      [{ skills: [{ source: 'acme/skills' }] }, 'skills.0.ref'],
      [{ skills: [{ source: 'not a repo', ref: 'v1' }] }, 'skills.0.source'],
      [{ skills: [{ name: 'Bad Name', content: 'x' }] }, 'skills.0.name'],
      [{ skills: [{ name: 'ok' }] }, 'skills.0.content'],
      [{ skills: [{ name: 'ok', content: 'x', source: 'a/b', ref: 'v' }] }, 'skills.0.source'],
      [
        {
          skills: [
            { name: 'ok', content: 'x' },
            { name: 'ok', content: 'y' },
          ],
        },
        'skills.1',
      ],
      [{ mcp_servers: { gh: { args: [] } } }, 'mcp_servers.gh.command'],
      [{ mcp_servers: { gh: { command: 'x', env: { 'BAD-NAME': 'v' } } } }, 'mcp_servers.gh.env.BAD-NAME'],
      [{ mcp_servers: { 'bad name': { command: 'x' } } }, 'mcp_servers.bad name'],
      [{ environment_id: 'nope' }, 'environment_id'],
      [{ vault_ids: ['nope'] }, 'vault_ids.0'],
      [{ metadata: 'x' }, 'metadata'],
    ];
    for (const [patch, field] of cases) {
      const res = await call(user, 'POST', '/api/agents', { ...base, ...patch });
      assert.equal(res.status, 422, `${JSON.stringify(patch)} → ${res.raw.slice(0, 300)}`);
      const errors = res.body!['errors'] as Record<string, string[]>;
      assert.ok(errors[field], `${field} missing in ${JSON.stringify(errors)}`);
    }
  });

  it('audits create, update and delete of every resource', async () => {
    const u = await createVerifiedUser(t.deps.db);
    const env = (await call(u, 'POST', '/api/environments', { name: 'e' })).body!['id'];
    await call(u, 'PUT', `/api/environments/${env}`, { name: 'e2' });
    const v = (await call(u, 'POST', '/api/vaults', { name: 'v' })).body!['id'];
    await call(u, 'PUT', `/api/vaults/${v}`, { name: 'v2' });
    const a = (
      await call(u, 'POST', '/api/agents', { name: 'a', model: 'openai/gpt-5', runtime: 'opencode' })
    ).body!['id'];
    await call(u, 'PUT', `/api/agents/${a}`, { name: 'a2', model: 'openai/gpt-5', runtime: 'opencode' });
    for (const url of [`/api/agents/${a}`, `/api/vaults/${v}`, `/api/environments/${env}`]) {
      assert.equal((await call(u, 'DELETE', url)).status, 204);
    }
    const rows = await t.deps.db
      .selectFrom('audit_events')
      .select(['type', 'actor_kind', 'actor_api_key_id'])
      .where('tenant_id', '=', u.id)
      .orderBy('id')
      .execute();
    assert.deepEqual(
      rows.map((r) => r.type),
      [
        'environment.created',
        'environment.updated',
        'vault.created',
        'vault.updated',
        'agent.created',
        'agent.updated',
        'agent.deleted',
        'vault.deleted',
        'environment.deleted',
      ],
    );
    for (const r of rows) {
      assert.equal(r.actor_kind, 'api_key');
      assert.equal(r.actor_api_key_id, u.apiKeyId);
    }
  });

  it('answers 401 without credentials', async () => {
    for (const url of ['/api/environments', '/api/vaults', '/api/agents']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 401);
    }
  });
});
