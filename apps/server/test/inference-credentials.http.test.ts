// Per-account inference credentials over HTTP (issue 10, item 4): write-only, encrypted with
// the tenant key, scoped to the account, refused to the sandbox callback key, audited without
// values, and every bad input a 422 (never a 500).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { hashPassword } from '../src/accounts/password.ts';
import { DecryptionError } from '../src/secrets/envelope.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  // The private ranges opened, as an operator of a LAN gateway does: the http rule is judged
  // here, the reach of loopback and private addresses in inference-credentials.reach.http.test.ts.
  t = await buildTestApp({
    env: { SANDBOXD_EGRESS_ALLOW_CIDRS: '10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7' },
  });
});
after(async () => {
  await t.close();
});

const PATH = '/api/account/inference-credentials';

function put(user: TestUser | { authorization: string }, provider: string, payload: unknown) {
  const headers = 'auth' in user ? user.auth : user;
  return t.app.inject({ method: 'PUT', url: `${PATH}/${provider}`, headers, payload: payload as object });
}
function del(user: TestUser | { authorization: string }, provider: string) {
  const headers = 'auth' in user ? user.auth : user;
  return t.app.inject({ method: 'DELETE', url: `${PATH}/${provider}`, headers });
}
function list(user: TestUser | { authorization: string }) {
  const headers = 'auth' in user ? user.auth : user;
  return t.app.inject({ method: 'GET', url: PATH, headers });
}

async function auditOf(user: TestUser) {
  return await t.deps.db
    .selectFrom('audit_events')
    .select(['type', 'metadata'])
    .where('tenant_id', '=', user.id)
    .where('type', 'like', 'inference_credential.%')
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** Every row of every table as PostgreSQL's text form (see secrets.dump.test.ts). */
async function fullTextDump(): Promise<string> {
  const tables = await t.deps.database.pool.query<{ schemaname: string; tablename: string }>(
    `SELECT schemaname, tablename FROM pg_tables
      WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`,
  );
  const parts: string[] = [];
  for (const { schemaname, tablename } of tables.rows) {
    const ident = `"${schemaname.replaceAll('"', '""')}"."${tablename.replaceAll('"', '""')}"`;
    const rows = await t.deps.database.pool.query<{ row: string }>(`SELECT t::text AS row FROM ${ident} t`);
    parts.push(...rows.rows.map((r) => r.row));
  }
  return parts.join('\n');
}

describe('inference credentials API', () => {
  it('is write-only: PUT and GET never show the key; GET lists all three providers', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const key = 'sk-ant-api03-writeonly-Q7d9XyZ0';
    const empty = await list(user);
    assert.equal(empty.statusCode, 200);
    assert.deepEqual(empty.json(), {
      data: [
        { provider: 'anthropic', set: false, base_url: null, updated_at: null },
        { provider: 'openai', set: false, base_url: null, updated_at: null },
        { provider: 'gemini', set: false, base_url: null, updated_at: null },
      ],
    });

    const set = await put(user, 'anthropic', { api_key: key, base_url: 'https://gw.example.com/anthropic' });
    assert.equal(set.statusCode, 200);
    assert.ok(!set.body.includes(key));
    const body = set.json();
    assert.deepEqual(Object.keys(body).sort(), ['base_url', 'provider', 'set', 'updated_at']);
    assert.equal(body.set, true);
    assert.equal(body.base_url, 'https://gw.example.com/anthropic');
    assert.ok(!Number.isNaN(Date.parse(body.updated_at)));

    const openai = await put(user, 'openai', { api_key: 'sk-proj-openai-key-5678' });
    assert.equal(openai.statusCode, 200);
    assert.equal(openai.json().base_url, null);

    const after = await list(user);
    assert.ok(!after.body.includes(key));
    assert.deepEqual(
      after
        .json()
        .data.map((c: { provider: string; set: boolean; base_url: string | null }) => [
          c.provider,
          c.set,
          c.base_url,
        ]),
      [
        ['anthropic', true, 'https://gw.example.com/anthropic'],
        ['openai', true, null],
        ['gemini', false, null],
      ],
    );

    // Replacing the key drops a base URL that is not sent again.
    assert.equal((await put(user, 'anthropic', { api_key: `${key}-v2` })).json().base_url, null);
    assert.ok(!t.logs.join('').includes(key), 'a key reached a log line');
  });

  it('stores the key encrypted: no table holds the plaintext, as text, hex or base64', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const key = 'AIzaSy-gemini-plaintext-Vb81mQ';
    assert.equal((await put(user, 'gemini', { api_key: key })).statusCode, 200);
    const dump = await fullTextDump();
    for (const form of [
      key,
      Buffer.from(key).toString('hex'),
      Buffer.from(key).toString('base64'),
      Buffer.from(key).toString('base64url'),
    ]) {
      assert.ok(!dump.includes(form), `the dump holds the key as ${form}`);
    }
    const decrypted = await t.deps.inferenceCredentials.forSandbox(user.id);
    assert.deepEqual(decrypted, [{ provider: 'gemini', apiKey: key, baseUrl: null }]);
  });

  it('a credential pasted into another account or provider fails authentication', async () => {
    const alice = await createVerifiedUser(t.deps.db);
    const bob = await createVerifiedUser(t.deps.db);
    await put(alice, 'anthropic', { api_key: 'sk-ant-alice-key-000111' });
    await put(bob, 'anthropic', { api_key: 'sk-ant-bob-key-222333' });
    await put(alice, 'openai', { api_key: 'sk-alice-openai-444555' });
    const stolen = await t.deps.db
      .selectFrom('inference_credentials')
      .select('ciphertext')
      .where('tenant_id', '=', alice.id)
      .where('provider', '=', 'anthropic')
      .executeTakeFirstOrThrow();
    await t.deps.db
      .updateTable('inference_credentials')
      .set({ ciphertext: stolen.ciphertext })
      .where('tenant_id', '=', bob.id)
      .where('provider', '=', 'anthropic')
      .execute();
    await assert.rejects(t.deps.inferenceCredentials.forSandbox(bob.id), DecryptionError);
    await t.deps.db
      .updateTable('inference_credentials')
      .set({ ciphertext: stolen.ciphertext })
      .where('tenant_id', '=', alice.id)
      .where('provider', '=', 'openai')
      .execute();
    await assert.rejects(t.deps.inferenceCredentials.forSandbox(alice.id), DecryptionError);
  });

  it('is scoped to the account: another tenant can neither see nor change nor delete it', async () => {
    const alice = await createVerifiedUser(t.deps.db);
    const mallory = await createVerifiedUser(t.deps.db);
    await put(alice, 'anthropic', { api_key: 'sk-ant-alice-scoped-9876' });
    const seen = (await list(mallory)).json().data;
    assert.ok(seen.every((c: { set: boolean }) => !c.set));
    assert.equal((await del(mallory, 'anthropic')).statusCode, 204);
    assert.equal((await put(mallory, 'anthropic', { api_key: 'sk-ant-mallory-0000' })).statusCode, 200);
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(alice.id), [
      { provider: 'anthropic', apiKey: 'sk-ant-alice-scoped-9876', baseUrl: null },
    ]);
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(mallory.id), [
      { provider: 'anthropic', apiKey: 'sk-ant-mallory-0000', baseUrl: null },
    ]);
  });

  it('refuses a conversation-scoped key (the sandbox callback) with 403: it cannot read, set or delete', async () => {
    const owner = await createVerifiedUser(t.deps.db);
    await put(owner, 'anthropic', { api_key: 'sk-ant-owner-callback-1234' });
    const agentId = uuidv7();
    await t.deps.db
      .insertInto('agents')
      .values({
        id: agentId,
        tenant_id: owner.id,
        name: 'a',
        model: 'm',
        runtime: 'claude',
        skills: '[]',
        mcp_servers: '{}',
        metadata: '{}',
      })
      .execute();
    const conversationId = uuidv7();
    await t.deps.db
      .insertInto('conversations')
      .values({
        id: conversationId,
        tenant_id: owner.id,
        agent_id: agentId,
        vault_id: null,
        status: 'idle',
        source: 'api',
        title: 't',
      })
      .execute();
    const minted = await t.deps.apiKeys.mintConversationKey(owner.id, conversationId);
    const callback = { authorization: `Bearer ${minted.key}` };
    for (const res of [
      await list(callback),
      await put(callback, 'anthropic', { api_key: 'sk-ant-attacker-replaced' }),
      await put(callback, 'openai', { api_key: 'sk-attacker-added-5555' }),
      await del(callback, 'anthropic'),
    ]) {
      assert.equal(res.statusCode, 403);
      assert.equal(res.json().error, 'forbidden');
      assert.ok(!res.body.includes('sk-ant-owner-callback-1234'));
    }
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(owner.id), [
      { provider: 'anthropic', apiKey: 'sk-ant-owner-callback-1234', baseUrl: null },
    ]);
    assert.equal((await list({ authorization: 'Bearer pdk_not_a_key' })).statusCode, 401);
  });

  it('answers 422 with field errors for bad input, never a 500, and never quotes the key', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const secretish = 'sk-ant-quoted-never-1 2';
    const cases: [unknown, string][] = [
      [{}, 'api_key'],
      [{ api_key: 42 }, 'api_key'],
      [{ api_key: null }, 'api_key'],
      [{ api_key: 'short' }, 'api_key'],
      [{ api_key: secretish }, 'api_key'],
      [{ api_key: 'sk-ant-line\nbreak-xxxx' }, 'api_key'],
      [{ api_key: 'sk-ant-nul\u0000-xxxxxxx' }, 'api_key'],
      [{ api_key: 'sk-ant-ünïcode-xxxxxxx' }, 'api_key'],
      [{ api_key: `sk-${'a'.repeat(5000)}` }, 'api_key'],
      [{ api_key: 'sk-ant-valid-key-1234', extra: 1 }, 'body'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: 'http://gw.example.com' }, 'base_url'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: 'ftp://gw.example.com' }, 'base_url'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: 'https://user:pw@gw.example.com' }, 'base_url'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: 'https://gw.example.com/?key=abc' }, 'base_url'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: 'https://gw.example.com/#x' }, 'base_url'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: 'gw.example.com' }, 'base_url'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: '' }, 'base_url'],
      [{ api_key: 'sk-ant-valid-key-1234', base_url: 7 }, 'base_url'],
      [
        { api_key: 'sk-ant-valid-key-1234', base_url: `https://gw.example.com/${'p'.repeat(3000)}` },
        'base_url',
      ],
      [[], 'body'],
      [null, 'body'],
    ];
    for (const [payload, field] of cases) {
      const res = await t.app.inject({
        method: 'PUT',
        url: `${PATH}/anthropic`,
        headers: { ...user.auth, 'content-type': 'application/json' },
        payload: JSON.stringify(payload),
      });
      assert.equal(
        res.statusCode,
        422,
        `${JSON.stringify(payload).slice(0, 80)} → ${res.statusCode} ${res.body}`,
      );
      const body = res.json();
      assert.equal(body.error, 'validation_failed');
      const fields = Object.keys(body.errors ?? {});
      assert.ok(
        fields.some((f) => f === field || f.startsWith(`${field}.`)) ||
          (field === 'body' && fields.length > 0),
        `${JSON.stringify(payload).slice(0, 80)}: errors ${JSON.stringify(body.errors)}`,
      );
      assert.ok(!res.body.includes('sk-ant-quoted-never'), res.body);
      assert.ok(!res.body.includes('sk-ant-valid-key-1234'), res.body);
    }
    const malformed = await t.app.inject({
      method: 'PUT',
      url: `${PATH}/anthropic`,
      headers: { ...user.auth, 'content-type': 'application/json' },
      payload: '{"api_key": "sk-ant-half',
    });
    assert.ok(malformed.statusCode >= 400 && malformed.statusCode < 500, String(malformed.statusCode));
    assert.ok(!malformed.body.includes('sk-ant-half'));
    // Nothing was stored by any of them.
    assert.ok((await list(user)).json().data.every((c: { set: boolean }) => !c.set));
    assert.ok(!t.logs.join('').includes('sk-ant-quoted-never'));
    assert.ok(!t.logs.join('').includes('sk-ant-half'));
  });

  it('accepts http base URLs only for private-network hosts', async () => {
    const user = await createVerifiedUser(t.deps.db);
    for (const base_url of [
      'http://10.1.2.3',
      'http://192.168.1.20:11434',
      'http://172.20.0.5',
      'http://[fd00::5]:8080',
      'http://litellm:4000',
      'http://gateway.internal/anthropic',
      'http://llm.test:8080',
      'https://api.anthropic.com',
    ]) {
      const res = await put(user, 'anthropic', { api_key: 'sk-ant-private-host-01', base_url });
      assert.equal(res.statusCode, 200, `${base_url}: ${res.body}`);
      assert.equal(res.json().base_url, base_url);
    }
    for (const base_url of ['http://8.8.8.8', 'http://172.32.0.1', 'http://gateway.example.com']) {
      assert.equal(
        (await put(user, 'anthropic', { api_key: 'sk-ant-private-host-01', base_url })).statusCode,
        422,
      );
    }
  });

  it('answers 404 to an unknown provider; DELETE is idempotent (204 when not set)', async () => {
    const user = await createVerifiedUser(t.deps.db);
    for (const res of [
      await put(user, 'mistral', { api_key: 'sk-some-valid-key-1' }),
      await put(user, 'ANTHROPIC', { api_key: 'sk-some-valid-key-1' }),
      await del(user, 'mistral'),
      await del(user, 'x'.repeat(60)),
    ]) {
      assert.equal(res.statusCode, 404, res.body);
      assert.equal(res.json().error, 'not_found');
      assert.match(res.json().message, /anthropic, openai, gemini/);
    }
    assert.equal((await del(user, 'gemini')).statusCode, 204);
    await put(user, 'gemini', { api_key: 'AIza-gemini-delete-me-1' });
    const gone = await del(user, 'gemini');
    assert.equal(gone.statusCode, 204);
    assert.equal(gone.body, '');
    assert.equal((await list(user)).json().data[2].set, false);
    assert.equal((await del(user, 'gemini')).statusCode, 204);
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(user.id), []);
  });

  it('records audit rows for set (created/updated) and delete, with no value', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const key = 'sk-audit-openai-key-Hq3';
    await put(user, 'openai', { api_key: key, base_url: 'https://openai-gw.example.com/v1' });
    await put(user, 'openai', { api_key: `${key}-2` });
    await del(user, 'openai');
    await del(user, 'openai'); // not set any more: no row
    const rows = await auditOf(user);
    assert.deepEqual(
      rows.map((r) => [r.type, r.metadata]),
      [
        ['inference_credential.set', { provider: 'openai', outcome: 'created', base_url_set: true }],
        ['inference_credential.set', { provider: 'openai', outcome: 'updated', base_url_set: false }],
        ['inference_credential.deleted', { provider: 'openai' }],
      ],
    );
    assert.ok(!JSON.stringify(rows).includes(key));
  });

  it('works with the session cookie, with the same-origin check on writes (CSRF)', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const password = 'correct horse battery staple';
    await t.deps.db
      .updateTable('users')
      .set({ password_hash: await hashPassword(password) })
      .where('id', '=', user.id)
      .execute();
    const origin = t.config.publicUrl.origin;
    const login = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: { origin },
      payload: { email: user.email, password },
    });
    assert.equal(login.statusCode, 200, login.body);
    const setCookie = login.headers['set-cookie'];
    const cookie = String(Array.isArray(setCookie) ? setCookie[0] : setCookie).split(';')[0] ?? '';
    const payload = { api_key: 'sk-ant-cookie-user-key-77' };
    const crossSite = await t.app.inject({
      method: 'PUT',
      url: `${PATH}/anthropic`,
      headers: { cookie, origin: 'https://evil.example' },
      payload,
    });
    assert.equal(crossSite.statusCode, 403);
    assert.equal(crossSite.json().error, 'csrf_failed');
    const noOrigin = await t.app.inject({ method: 'DELETE', url: `${PATH}/anthropic`, headers: { cookie } });
    assert.equal(noOrigin.statusCode, 403);
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(user.id), []);
    const ok = await t.app.inject({
      method: 'PUT',
      url: `${PATH}/anthropic`,
      headers: { cookie, origin },
      payload,
    });
    assert.equal(ok.statusCode, 200, ok.body);
    const read = await t.app.inject({ method: 'GET', url: PATH, headers: { cookie } });
    assert.equal(read.statusCode, 200);
    assert.equal(read.json().data[0].set, true);
  });

  it('is documented in the OpenAPI document, with no field that could carry the key back', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    const collection = doc.paths[PATH];
    const one = doc.paths[`${PATH}/{provider}`];
    assert.ok(collection?.get);
    assert.ok(one?.put && one?.delete);
    assert.ok(JSON.stringify(one.put.requestBody).includes('api_key'));
    for (const op of [collection.get, one.put, one.delete])
      assert.ok(!JSON.stringify(op.responses).includes('api_key'));
  });
});
