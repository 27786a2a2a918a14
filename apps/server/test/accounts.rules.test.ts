// Registration, login, session, CSRF, API key, admin and audit rules over HTTP
// (EMAIL_DELIVERY=none unless a test says otherwise).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { insertUser } from '../src/accounts/accounts.repo.ts';
import { hashPassword, passwordStats } from '../src/accounts/password.ts';
import { TASKS } from '../src/tasks/tasks.ts';
import { auditRows, browser, sessionCookie } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createVerifiedUser } from './helpers/factories.ts';

const password = 'a perfectly fine passphrase';
let database: TestDatabase;
before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  await database.drop();
});

async function register(t: TestApp, email: string, pw = password) {
  return await t.app.inject({ method: 'POST', url: '/api/auth/register', payload: { email, password: pw } });
}
async function login(t: TestApp, email: string, pw = password, headers: Record<string, string> = {}) {
  return await t.app.inject({
    method: 'POST',
    url: '/api/auth/login',
    headers,
    payload: { email, password: pw },
  });
}

describe('registration', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database });
  });
  after(async () => {
    await t.close();
  });

  it('self-verifies under EMAIL_DELIVERY=none and says the user can sign in now', async () => {
    const res = await register(t, 'self@example.com');
    assert.equal(res.statusCode, 201);
    assert.equal(res.json().can_sign_in_now, true);
    assert.match(res.json().message, /sign in now/);
    assert.equal(res.json().user.email_verified, true);
    assert.equal((await login(t, 'self@example.com')).statusCode, 200);
  });

  it('creates the tenant data key together with the account', async () => {
    const res = await register(t, 'keyed@example.com');
    assert.equal(res.statusCode, 201);
    const row = await t.deps.db
      .selectFrom('tenant_keys')
      .select(['tenant_id'])
      .where('tenant_id', '=', res.json().user.id)
      .executeTakeFirst();
    assert.ok(row, 'a wrapped tenant key exists right after registration');
  });

  it('applies the password policy: 8..256 characters, no composition rules, common passwords refused', async () => {
    for (const [pw, status] of [
      ['short12', 422],
      ['password1', 422],
      ['Password123', 422],
      ['x'.repeat(257), 422],
      ['lowercase only words', 201],
      ['€'.repeat(64), 201],
    ] as const) {
      const res = await register(t, `p${Math.random().toString(36).slice(2)}@example.com`, pw);
      assert.equal(res.statusCode, status, `${pw.slice(0, 20)}: ${res.body}`);
      if (status === 422) {
        assert.equal(res.json().error, 'validation_failed');
        assert.ok(res.json().errors.password);
      }
    }
  });

  it('treats emails case-insensitively and refuses a duplicate with 422', async () => {
    assert.equal((await register(t, 'Dup@Example.com')).statusCode, 201);
    const again = await register(t, 'dup@example.COM');
    assert.equal(again.statusCode, 422);
    assert.deepEqual(again.json().errors, { email: ['is already registered'] });
  });

  it('answers malformed input with 4xx, never 500', async () => {
    const cases = [
      { payload: 'not json', headers: { 'content-type': 'application/json' } },
      { payload: { email: 'nope', password } },
      { payload: { email: 42, password: [] } },
      { payload: {} },
    ];
    for (const c of cases) {
      const res = await t.app.inject({ method: 'POST', url: '/api/auth/register', ...c });
      assert.ok(res.statusCode >= 400 && res.statusCode < 500, `${res.statusCode} ${res.body}`);
    }
    const badCursor = await t.app.inject({
      url: '/api/audit?cursor=%%%',
      headers: (await createVerifiedUser(t.deps.db)).auth,
    });
    assert.equal(badCursor.statusCode, 422);
  });

  it('honours REGISTRATION_ENABLED and REGISTRATION_ALLOWED_EMAIL_DOMAINS', async () => {
    const closed = await buildTestApp({ database, env: { REGISTRATION_ENABLED: 'false' } });
    const domains = await buildTestApp({
      database,
      env: { REGISTRATION_ALLOWED_EMAIL_DOMAINS: 'corp.example' },
    });
    try {
      const res = await register(closed, 'closed@example.com');
      assert.equal(res.statusCode, 403);
      assert.equal(res.json().error, 'registration_closed');
      assert.equal((await register(domains, 'outsider@example.com')).statusCode, 422);
      assert.equal((await register(domains, 'insider@CORP.example')).statusCode, 201);
    } finally {
      await closed.close();
      await domains.close();
    }
  });
});

describe('login rules', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database });
    await register(t, 'known@example.com');
    await insertUser(t.deps.db, { email: 'oauth-only@example.com', passwordHash: null, verified: true });
    await insertUser(t.deps.db, {
      email: 'unverified@example.com',
      passwordHash: await hashPassword(password),
      verified: false,
    });
  });
  after(async () => {
    await t.close();
  });

  it('answers unknown user, wrong password and OAuth-only account identically, through the dummy hash', async () => {
    const before = passwordStats.dummyVerifications;
    const unknown = await login(t, 'nobody@example.com');
    assert.equal(
      passwordStats.dummyVerifications,
      before + 1,
      'unknown user verifies against the dummy hash',
    );
    const wrong = await login(t, 'known@example.com', 'not the right passphrase');
    assert.equal(passwordStats.dummyVerifications, before + 1, 'a known user verifies against its own hash');
    const oauthOnly = await login(t, 'oauth-only@example.com');
    assert.equal(passwordStats.dummyVerifications, before + 2);
    for (const res of [unknown, wrong, oauthOnly]) {
      assert.equal(res.statusCode, 401);
      assert.deepEqual(res.json(), unknown.json());
    }
    const token = await t.app.inject({
      method: 'POST',
      url: '/api/auth/token',
      payload: { email: 'nobody@example.com', password },
    });
    assert.equal(token.statusCode, 401);
  });

  it('refuses an unverified account only after a correct password', async () => {
    assert.equal((await login(t, 'unverified@example.com', 'wrong passphrase!')).statusCode, 401);
    const res = await login(t, 'unverified@example.com');
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().error, 'email_not_verified');
  });

  it('refuses a suspended account neutrally after the password check and ends its sessions', async () => {
    await register(t, 'suspend-me@example.com');
    const cookie = sessionCookie(await login(t, 'suspend-me@example.com'));
    await t.deps.db
      .updateTable('users')
      .set({ suspended_at: new Date() })
      .where('email', '=', 'suspend-me@example.com')
      .execute();
    assert.equal((await login(t, 'suspend-me@example.com', 'wrong passphrase!')).statusCode, 401);
    const res = await login(t, 'suspend-me@example.com');
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().error, 'account_unavailable');
    const sessions = await t.deps.db
      .selectFrom('sessions')
      .innerJoin('users', 'users.id', 'sessions.user_id')
      .select('sessions.id')
      .where('users.email', '=', 'suspend-me@example.com')
      .execute();
    assert.equal(sessions.length, 0);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, cookie) })).statusCode, 401);
  });

  it('meters login attempts per IP before authentication', async () => {
    const limited = await buildTestApp({ database, env: { AUTH_RATE_LIMIT_MAX: '3' } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await login(limited, 'nobody@example.com', password, {});
        statuses.push(res.statusCode);
      }
      assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
    } finally {
      await limited.close();
    }
  });
});

describe('sessions and CSRF', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database, env: { CHECK_ORIGIN_EXTRA: 'https://console.example.com' } });
    await register(t, 'browser@example.com');
  });
  after(async () => {
    await t.close();
  });

  it('requires an allowed Origin (or Referer) on cookie-authenticated writes, but not on bearer requests', async () => {
    const cookie = sessionCookie(await login(t, 'browser@example.com'));
    const post = (headers: Record<string, string>) =>
      t.app.inject({ method: 'POST', url: '/api/auth/api-keys', headers, payload: { name: 'k' } });
    const jar = { cookie: `paddock_session=${cookie}` };
    assert.equal((await post(jar)).statusCode, 403, 'no Origin');
    assert.equal((await post({ ...jar, origin: 'https://evil.example' })).json().error, 'csrf_failed');
    assert.equal((await post({ ...jar, origin: t.config.publicUrl.origin })).statusCode, 201);
    assert.equal((await post({ ...jar, origin: 'https://console.example.com' })).statusCode, 201);
    assert.equal((await post({ ...jar, referer: `${t.config.publicUrl.origin}/settings` })).statusCode, 201);
    // Reads need no Origin.
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: jar })).statusCode, 200);
    // Bearer requests are exempt, whatever Origin they carry.
    const key = (await post({ ...jar, origin: t.config.publicUrl.origin })).json().key as string;
    const bearer = await t.app.inject({
      method: 'POST',
      url: '/api/auth/api-keys',
      headers: { authorization: `Bearer ${key}`, origin: 'https://evil.example' },
      payload: { name: 'k2' },
    });
    assert.equal(bearer.statusCode, 201);
    // Login CSRF: a foreign page cannot sign the browser in.
    const foreign = await login(t, 'browser@example.com', password, { origin: 'https://evil.example' });
    assert.equal(foreign.statusCode, 403);
  });

  it('logout ends the session server-side', async () => {
    const cookie = sessionCookie(await login(t, 'browser@example.com'));
    const out = await t.app.inject({ method: 'POST', url: '/api/auth/logout', headers: browser(t, cookie) });
    assert.equal(out.statusCode, 200);
    assert.match(String(out.headers['set-cookie']), /paddock_session=;/);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, cookie) })).statusCode, 401);
  });

  it('expires sessions after the idle and the absolute timeout', async () => {
    const idle = sessionCookie(await login(t, 'browser@example.com'));
    const absolute = sessionCookie(await login(t, 'browser@example.com'));
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, idle) })).statusCode, 200);
    const ids = await t.deps.db.selectFrom('sessions').select(['id', 'created_at']).orderBy('id').execute();
    await t.deps.db
      .updateTable('sessions')
      .set({ last_seen_at: new Date(Date.now() - 25 * 3600_000) })
      .where('id', '=', ids.at(-2)!.id)
      .execute();
    await t.deps.db
      .updateTable('sessions')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', ids.at(-1)!.id)
      .execute();
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, idle) })).statusCode, 401);
    assert.equal(
      (await t.app.inject({ url: '/api/auth/me', headers: browser(t, absolute) })).statusCode,
      401,
    );
  });

  it('a password change ends every other session and keeps the current one', async () => {
    const other = sessionCookie(await login(t, 'browser@example.com'));
    const current = sessionCookie(await login(t, 'browser@example.com'));
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/password',
      headers: browser(t, current),
      payload: { current_password: password, new_password: 'another fine passphrase' },
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.ok(res.json().sessions_ended >= 1);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, other) })).statusCode, 401);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, current) })).statusCode, 200);
  });

  it('signs out every other session on request and keeps the current one, audited', async () => {
    const email = 'browser@example.com';
    const pw = 'another fine passphrase';
    const loginWith = async () =>
      sessionCookie(
        await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: pw } }),
      );
    const other = await loginWith();
    const current = await loginWith();
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/sessions/end-others',
      headers: browser(t, current),
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.ok(res.json().sessions_ended >= 1);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, other) })).statusCode, 401);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, current) })).statusCode, 200);
    assert.equal((await auditRows(t, 'auth.sessions.ended')).length, 1);
    // A cross-site page cannot sign the person's other sessions out (CSRF).
    const forged = await t.app.inject({
      method: 'POST',
      url: '/api/auth/sessions/end-others',
      headers: { cookie: current, origin: 'https://evil.example' },
    });
    assert.equal(forged.statusCode, 403);
  });
});

describe('API keys', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database });
  });
  after(async () => {
    await t.close();
  });

  it('creates keys with an optional expiry, lists metadata, and 404s a foreign key', async () => {
    const alice = await createVerifiedUser(t.deps.db);
    const bob = await createVerifiedUser(t.deps.db);
    const created = await t.app.inject({
      method: 'POST',
      url: '/api/auth/api-keys',
      headers: alice.auth,
      payload: { name: 'ci', expires_in_days: 7 },
    });
    assert.equal(created.statusCode, 201);
    const body = created.json();
    assert.match(body.key, /^pdk_[A-Za-z0-9_-]{43}$/);
    assert.ok(Date.parse(body.expires_at) > Date.now() + 6 * 86400_000);
    const foreign = await t.app.inject({
      method: 'DELETE',
      url: `/api/auth/api-keys/${body.id}`,
      headers: bob.auth,
    });
    assert.equal(foreign.statusCode, 404);
    assert.equal(
      (await t.app.inject({ method: 'DELETE', url: '/api/auth/api-keys/nope', headers: bob.auth }))
        .statusCode,
      404,
    );
    const stored = await t.deps.db
      .selectFrom('api_keys')
      .select('key_hash')
      .where('id', '=', body.id)
      .executeTakeFirst();
    assert.ok(!stored?.key_hash.toString('utf8').includes(body.key), 'only the hash is stored');
    // Expired keys stop working.
    await t.deps.db
      .updateTable('api_keys')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', body.id)
      .execute();
    assert.equal(
      (await t.app.inject({ url: '/api/auth/me', headers: { authorization: `Bearer ${body.key}` } }))
        .statusCode,
      401,
    );
  });

  it('conversation-scoped keys expire in 30 days, reach only opted-in routes, and are revoked by conversation', async () => {
    const owner = await createVerifiedUser(t.deps.db);
    // The key belongs to a real conversation (api_keys.conversation_id references it).
    const conversationId = '0190f0c2-0000-7000-8000-000000000001';
    const agentId = '0190f0c2-0000-7000-8000-000000000002';
    await t.deps.db
      .insertInto('agents')
      .values({
        id: agentId,
        tenant_id: owner.id,
        name: 'a',
        model: 'anthropic/m',
        runtime: 'claude',
        skills: '[]',
        mcp_servers: '{}',
        metadata: '{}',
      })
      .execute();
    await t.deps.db
      .insertInto('conversations')
      .values({
        id: conversationId,
        tenant_id: owner.id,
        agent_id: agentId,
        vault_id: null,
        status: 'idle',
        source: 'api',
        parent_conversation_id: null,
        title: 't',
        failure_reason: null,
        runtime_session_id: null,
        session_state: null,
        owner_node: null,
      })
      .execute();
    const minted = await t.deps.apiKeys.mintConversationKey(owner.id, conversationId);
    assert.equal(minted.scope, 'conversation');
    const days = (Date.parse(minted.expires_at!) - Date.now()) / 86400_000;
    assert.ok(days > 29.9 && days <= 30);
    const headers = { authorization: `Bearer ${minted.key}` };
    const res = await t.app.inject({ url: '/api/auth/api-keys', headers });
    assert.equal(res.statusCode, 403, 'a callback token cannot manage keys');
    assert.equal(await t.deps.apiKeys.revokeConversationKeys(conversationId), 1);
    assert.equal((await t.app.inject({ url: '/api/auth/api-keys', headers })).statusCode, 401);
  });
});

describe('admin, audit and release tasks', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database });
  });
  after(async () => {
    await t.close();
  });

  it('lets only admins list and suspend users; suspension blocks keys; reads are audited', async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);
    assert.equal((await t.app.inject({ url: '/api/admin/users', headers: user.auth })).statusCode, 403);
    const list = await t.app.inject({ url: '/api/admin/users?limit=1', headers: admin.auth });
    assert.equal(list.statusCode, 200);
    assert.equal(list.json().data.length, 1);
    assert.equal(list.json().meta.has_more, true);
    const suspend = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${user.id}/suspend`,
      headers: admin.auth,
    });
    assert.equal(suspend.json().user.suspended, true);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: user.auth })).statusCode, 401);
    await t.app.inject({ method: 'POST', url: `/api/admin/users/${user.id}/unsuspend`, headers: admin.auth });
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: user.auth })).statusCode, 200);
    const self = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${admin.id}/suspend`,
      headers: admin.auth,
    });
    assert.equal(self.statusCode, 422);

    // Tenants read their own audit events; admins read others', and that read is audited.
    const own = await t.app.inject({ url: '/api/audit', headers: user.auth });
    assert.deepEqual(
      own.json().data.map((e: { type: string }) => e.type),
      ['admin.user.unsuspended', 'admin.user.suspended'],
    );
    assert.equal(
      (await t.app.inject({ url: `/api/admin/audit?tenant_id=${admin.id}`, headers: user.auth })).statusCode,
      403,
    );
    const cross = await t.app.inject({ url: `/api/admin/audit?tenant_id=${user.id}`, headers: admin.auth });
    assert.equal(cross.statusCode, 200);
    const adminTypes = (await auditRows(t)).filter((r) => r.tenant_id === admin.id).map((r) => r.type);
    assert.ok(adminTypes.includes('admin.users.listed'));
    assert.ok(adminTypes.includes('admin.audit.read'));
  });

  it('runs verify-email and promote-admin release tasks idempotently, audited', async () => {
    await insertUser(t.deps.db, { email: 'ops@example.com', passwordHash: null, verified: false });
    const lines: string[] = [];
    const run = (name: string) =>
      TASKS[name]!.run({ deps: t.deps, args: ['OPS@example.com'], print: (l) => lines.push(l) });
    await run('verify-email');
    await run('verify-email');
    await run('promote-admin');
    await run('promote-admin');
    assert.deepEqual(lines, [
      'verified OPS@example.com',
      'OPS@example.com was already verified',
      'granted the admin role to OPS@example.com',
      'OPS@example.com is already an admin',
    ]);
    const grants = (await auditRows(t, 'admin.role.granted')).filter(
      (r) => r.metadata['via'] === 'release_task',
    );
    assert.equal(grants.length, 1);
    assert.equal(grants[0]?.actor_user_id, null);
  });

  it('answers resend-verification and password-reset the same for known and unknown addresses', async () => {
    const mail = await buildTestApp({
      database,
      env: { EMAIL_DELIVERY: '', SMTP_HOST: '127.0.0.1', SMTP_PORT: '2' },
    });
    try {
      await register(mail, 'pending@example.com');
      for (const url of ['/api/auth/resend-verification', '/api/auth/password-reset']) {
        const known = await mail.app.inject({
          method: 'POST',
          url,
          payload: { email: 'pending@example.com' },
        });
        const unknown = await mail.app.inject({
          method: 'POST',
          url,
          payload: { email: 'ghost@example.com' },
        });
        assert.equal(known.statusCode, 202);
        assert.deepEqual(known.json(), unknown.json());
      }
      const bad = await mail.app.inject({
        method: 'POST',
        url: '/api/auth/password-reset/confirm',
        payload: { token: 'made-up', password: 'a brand new passphrase' },
      });
      assert.equal(bad.statusCode, 422);
      assert.ok(bad.json().errors.token);
    } finally {
      await mail.close();
    }
  });
});
