// Tenant isolation matrix: for every route of environments, vaults, agents, secrets and
// apply, tenant B using tenant A's ids gets exactly the answer of a missing id (404), and
// A's data is unchanged afterwards.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
const ids = { env: '', vault: '', agent: '' };
const MISSING = '01900000-0000-7000-8000-00000000abcd';

before(async () => {
  t = await buildTestApp();
  alice = await createVerifiedUser(t.deps.db);
  bob = await createVerifiedUser(t.deps.db);
  const post = async (url: string, payload: object) => {
    const res = await t.app.inject({ method: 'POST', url, headers: alice.auth, payload });
    assert.ok(res.statusCode < 300, res.body);
    return res.json() as { id: string };
  };
  ids.env = (await post('/api/environments', { name: 'shared-name', env_vars: { A: '1' } })).id;
  ids.vault = (await post('/api/vaults', { name: 'shared-name' })).id;
  ids.agent = (
    await post('/api/agents', {
      name: 'shared-name',
      model: 'x/y',
      runtime: 'claude',
      environment_id: ids.env,
      vault_ids: [ids.vault],
    })
  ).id;
  await post(`/api/environments/${ids.env}/secrets`, { key: 'TOKEN', value: 'alice-env-secret' });
  await post(`/api/vaults/${ids.vault}/secrets`, { key: 'TOKEN', value: 'alice-vault-secret' });
});
after(async () => {
  await t.close();
});

/** Everything tenant A owns, including decrypted secret values. */
async function snapshotOfAlice() {
  const db = t.deps.db;
  const rows = async (
    table: 'environments' | 'vaults' | 'agents' | 'secrets' | 'agent_vaults' | 'tenant_keys',
  ) => await db.selectFrom(table).selectAll().where('tenant_id', '=', alice.id).execute();
  return {
    environments: await rows('environments'),
    vaults: await rows('vaults'),
    agents: await rows('agents'),
    secrets: await rows('secrets'),
    agentVaults: await rows('agent_vaults'),
    tenantKeys: await rows('tenant_keys'),
    merged: await t.deps.secrets.mergedEnv(alice.id, { environmentId: ids.env, vaultId: ids.vault }),
  };
}

type Case = {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: (id: string) => string;
  payload?: object;
  of: keyof typeof ids;
};

const CASES: Case[] = [
  { method: 'GET', url: (id) => `/api/environments/${id}`, of: 'env' },
  { method: 'PUT', url: (id) => `/api/environments/${id}`, payload: { name: 'taken-over' }, of: 'env' },
  { method: 'DELETE', url: (id) => `/api/environments/${id}`, of: 'env' },
  { method: 'GET', url: (id) => `/api/environments/${id}/secrets`, of: 'env' },
  {
    method: 'POST',
    url: (id) => `/api/environments/${id}/secrets`,
    payload: { key: 'TOKEN', value: 'bob' },
    of: 'env',
  },
  { method: 'DELETE', url: (id) => `/api/environments/${id}/secrets/TOKEN`, of: 'env' },
  { method: 'GET', url: (id) => `/api/vaults/${id}`, of: 'vault' },
  { method: 'PUT', url: (id) => `/api/vaults/${id}`, payload: { name: 'taken-over' }, of: 'vault' },
  { method: 'DELETE', url: (id) => `/api/vaults/${id}`, of: 'vault' },
  { method: 'GET', url: (id) => `/api/vaults/${id}/secrets`, of: 'vault' },
  {
    method: 'POST',
    url: (id) => `/api/vaults/${id}/secrets`,
    payload: { key: 'TOKEN', value: 'bob' },
    of: 'vault',
  },
  { method: 'DELETE', url: (id) => `/api/vaults/${id}/secrets/TOKEN`, of: 'vault' },
  { method: 'GET', url: (id) => `/api/agents/${id}`, of: 'agent' },
  {
    method: 'PUT',
    url: (id) => `/api/agents/${id}`,
    payload: { name: 'taken-over', model: 'x/y', runtime: 'codex' },
    of: 'agent',
  },
  { method: 'DELETE', url: (id) => `/api/agents/${id}`, of: 'agent' },
];

describe('tenant isolation', () => {
  it("answers tenant B on every route with A's ids exactly like a missing id, and leaves A unchanged", async () => {
    const before = await snapshotOfAlice();
    for (const c of CASES) {
      const send = (id: string) =>
        t.app.inject({
          method: c.method,
          url: c.url(id),
          headers: bob.auth,
          ...(c.payload ? { payload: c.payload } : {}),
        });
      const foreign = await send(ids[c.of]);
      const missing = await send(MISSING);
      assert.equal(foreign.statusCode, 404, `${c.method} ${c.url(':id')}: ${foreign.body}`);
      assert.equal(foreign.body, missing.body, `${c.method} ${c.url(':id')} differs from a missing id`);
    }
    assert.deepEqual(await snapshotOfAlice(), before);
  });

  it("refuses A's environment and vaults as references in B's agents, exactly like missing ones", async () => {
    const before = await snapshotOfAlice();
    const base = { name: 'b-agent', model: 'x/y', runtime: 'claude' };
    const bobAgent = await t.app.inject({
      method: 'POST',
      url: '/api/agents',
      headers: bob.auth,
      payload: base,
    });
    assert.equal(bobAgent.statusCode, 201);
    for (const patch of [{ environment_id: ids.env }, { vault_ids: [ids.vault] }]) {
      for (const [method, url] of [
        ['POST', '/api/agents'],
        ['PUT', `/api/agents/${bobAgent.json().id}`],
      ] as const) {
        const foreign = await t.app.inject({
          method,
          url,
          headers: bob.auth,
          payload: { ...base, ...patch },
        });
        const missingPatch =
          'environment_id' in patch ? { environment_id: MISSING } : { vault_ids: [MISSING] };
        const missing = await t.app.inject({
          method,
          url,
          headers: bob.auth,
          payload: { ...base, ...missingPatch },
        });
        assert.equal(foreign.statusCode, 404, `${method} ${url} ${JSON.stringify(patch)}`);
        assert.equal(foreign.body, missing.body);
      }
    }
    assert.deepEqual(await snapshotOfAlice(), before);
  });

  it("never lists or filters into A's resources, and B's apply with the same names touches only B", async () => {
    const before = await snapshotOfAlice();
    for (const url of [
      '/api/environments',
      '/api/vaults',
      '/api/agents',
      `/api/agents?environment_id=${ids.env}`,
    ]) {
      const res = await t.app.inject({ method: 'GET', url, headers: bob.auth });
      assert.equal(res.statusCode, 200);
      const found = (res.json().data as Array<{ id: string }>).map((r) => r.id);
      for (const id of Object.values(ids)) assert.ok(!found.includes(id), `${url} shows ${id}`);
    }
    const applied = await t.app.inject({
      method: 'POST',
      url: '/api/apply',
      headers: bob.auth,
      payload: {
        resources: [
          { kind: 'Environment', name: 'shared-name', spec: { secrets: { TOKEN: 'bob-secret' } } },
          { kind: 'Vault', name: 'shared-name', spec: { secrets: { TOKEN: 'bob-secret' } } },
          {
            kind: 'Agent',
            name: 'shared-name',
            spec: { model: 'x/y', runtime: 'gemini', environment: 'shared-name' },
          },
        ],
      },
    });
    assert.equal(applied.statusCode, 200);
    const results = applied.json().results as Array<{ action: string; id: string }>;
    assert.deepEqual(
      results.map((r) => r.action),
      ['created', 'created', 'created'],
    );
    for (const r of results) assert.ok(!Object.values(ids).includes(r.id));
    assert.deepEqual(await snapshotOfAlice(), before);
  });
});
