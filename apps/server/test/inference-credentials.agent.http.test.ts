// Issue 37, finding 3: GET /api/agents/:id/credential tells, before a conversation starts, where
// the agent's turns get their provider key from, so the console warns instead of a turn failing
// with exit 2. Names only; tenant-scoped (another tenant's agent or vault is a missing one).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

async function call(user: TestUser, method: 'GET' | 'POST' | 'PUT', url: string, payload?: object) {
  const res = await t.app.inject({ method, url, headers: user.auth, ...(payload ? { payload } : {}) });
  return { status: res.statusCode, body: res.json() };
}
async function created(user: TestUser, url: string, payload: object): Promise<string> {
  const res = await call(user, 'POST', url, payload);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.id;
}
const check = (user: TestUser, agent: string, vault?: string) =>
  call(user, 'GET', `/api/agents/${agent}/credential${vault ? `?vault_id=${vault}` : ''}`);

describe("an agent's provider key, before a conversation", () => {
  it('answers source null when no key is set anywhere, then where it comes from', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const environment = await created(user, '/api/environments', { name: 'env' });
    const vault = await created(user, '/api/vaults', { name: 'vault' });
    const agent = await created(user, '/api/agents', {
      name: 'claude-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      environment_id: environment,
      vault_ids: [vault],
    });
    assert.deepEqual((await check(user, agent)).body, {
      provider: 'anthropic',
      key_var: 'ANTHROPIC_API_KEY',
      source: null,
    });

    const secret = await call(user, 'POST', `/api/vaults/${vault}/secrets`, {
      key: 'ANTHROPIC_API_KEY',
      value: 'sk-ant-vault-0123456789',
    });
    assert.equal(secret.status, 201);
    assert.equal((await check(user, agent)).body.source, null, 'the vault counts only when it is named');
    assert.equal((await check(user, agent, vault)).body.source, 'vault');

    const account = await call(user, 'PUT', '/api/account/inference-credentials/anthropic', {
      api_key: 'sk-ant-account-0123456789',
    });
    assert.equal(account.status, 200);
    assert.equal((await check(user, agent)).body.source, 'account');

    const envSecret = await call(user, 'POST', `/api/environments/${environment}/secrets`, {
      key: 'ANTHROPIC_API_KEY',
      value: 'sk-ant-env-0123456789',
    });
    assert.equal(envSecret.status, 201);
    const answer = await check(user, agent, vault);
    assert.equal(answer.body.source, 'environment', "the environment's key wins, as in the sandbox env");
    assert.ok(!JSON.stringify(answer.body).includes('sk-ant'), 'no value in the answer');
  });

  it("follows the runtime's provider: codex → openai; an opencode model of another provider → null", async () => {
    const user = await createVerifiedUser(t.deps.db);
    const codex = await created(user, '/api/agents', {
      name: 'codex-agent',
      model: 'openai/gpt-5',
      runtime: 'codex',
    });
    assert.deepEqual((await check(user, codex)).body, {
      provider: 'openai',
      key_var: 'OPENAI_API_KEY',
      source: null,
    });
    // An opencode agent of a provider Paddock has no credential for: refused on write since the
    // model rule (agents.models.ts), so one stored before it.
    const other = uuidv7();
    await t.deps.db
      .insertInto('agents')
      .values({
        id: other,
        tenant_id: user.id,
        name: 'opencode-agent',
        model: 'openrouter/some-model',
        runtime: 'opencode',
        skills: '[]',
        mcp_servers: '{}',
        metadata: '{}',
      })
      .execute();
    assert.deepEqual((await check(user, other)).body, { provider: null, key_var: null, source: null });
  });

  it('answers the same for the fields of an agent not created yet (the agent form)', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const environment = await created(user, '/api/environments', {
      name: 'keyed-env',
      env_vars: { GEMINI_API_KEY: 'not-a-secret-here' },
    });
    const form = (query: string) => call(user, 'GET', `/api/account/inference-credentials/check?${query}`);
    assert.deepEqual((await form('runtime=gemini&model=gemini/gemini-2.5-flash')).body, {
      provider: 'gemini',
      key_var: 'GEMINI_API_KEY',
      source: null,
    });
    const withEnv = await form(`runtime=gemini&model=gemini/gemini-2.5-flash&environment_id=${environment}`);
    assert.equal(withEnv.body.source, 'environment');
    assert.ok(!JSON.stringify(withEnv.body).includes('not-a-secret-here'));
    const stranger = await createVerifiedUser(t.deps.db);
    const theirs = await call(
      stranger,
      'GET',
      `/api/account/inference-credentials/check?runtime=gemini&model=gemini/gemini-2.5-flash&environment_id=${environment}`,
    );
    assert.equal(theirs.status, 404, "another tenant's environment is a missing one");
    const bad = await form('runtime=nope&model=x');
    assert.equal(bad.status, 422);
    assert.ok(bad.body.errors?.runtime, JSON.stringify(bad.body));
  });

  it("answers 404 for another tenant's agent or vault and for an unknown id, 422 for a vault id that is not one", async () => {
    const owner = await createVerifiedUser(t.deps.db);
    const stranger = await createVerifiedUser(t.deps.db);
    const agent = await created(owner, '/api/agents', {
      name: 'mine',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    const theirVault = await created(stranger, '/api/vaults', { name: 'theirs' });
    assert.equal((await check(stranger, agent)).status, 404);
    assert.equal((await check(owner, agent, theirVault)).status, 404);
    assert.equal((await check(owner, 'not-an-id')).status, 404);
    assert.equal((await check(owner, agent, 'nope')).status, 422);
  });
});
