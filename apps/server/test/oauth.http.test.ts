// GitHub sign-in against a loopback fake that speaks GitHub's OAuth and REST endpoints:
// authorize redirect, POST /login/oauth/access_token, GET /user, GET /user/emails.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { hashPassword } from '../src/accounts/password.ts';
import { auditRows } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';

interface FakeUser {
  id: number;
  login: string;
  emails: Array<{ email: string; primary: boolean; verified: boolean }>;
}

async function fakeGithub(clientId: string, clientSecret: string) {
  const codes = new Map<string, FakeUser>();
  const tokens = new Map<string, FakeUser>();
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && url.pathname === '/login/oauth/access_token') {
        const body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
        const user = codes.get(body.code);
        if (body.client_id !== clientId || body.client_secret !== clientSecret || !user) {
          return send(200, { error: 'bad_verification_code' });
        }
        codes.delete(body.code);
        const token = `gho_${Math.random().toString(36).slice(2)}`;
        tokens.set(token, user);
        return send(200, { access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
      }
      const user = tokens.get((req.headers.authorization ?? '').replace(/^Bearer /, ''));
      if (!user) return send(401, { message: 'Bad credentials' });
      if (req.method === 'GET' && url.pathname === '/user')
        return send(200, { id: user.id, login: user.login });
      if (req.method === 'GET' && url.pathname === '/user/emails')
        return send(
          200,
          user.emails.map((e) => ({ ...e, visibility: null })),
        );
      return send(404, { message: 'Not Found' });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    /** What GitHub does when the user approves: a code bound to that user. */
    approve(user: FakeUser) {
      const code = Math.random().toString(36).slice(2);
      codes.set(code, user);
      return code;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('GitHub sign-in', () => {
  let t: TestApp;
  let gh: Awaited<ReturnType<typeof fakeGithub>>;
  before(async () => {
    gh = await fakeGithub('client-1', 'shh-secret');
    t = await buildTestApp({
      env: {
        GITHUB_CLIENT_ID: 'client-1',
        GITHUB_CLIENT_SECRET: 'shh-secret',
        GITHUB_OAUTH_BASE_URL: gh.base,
        GITHUB_API_URL: gh.base,
      },
    });
  });
  after(async () => {
    await t.close();
    await gh.close();
  });

  async function signIn(user: FakeUser, tamper?: (state: string) => string) {
    const start = await t.app.inject({ url: '/auth/oauth/github' });
    assert.equal(start.statusCode, 302);
    const location = new URL(String(start.headers.location));
    assert.equal(location.origin + location.pathname, `${gh.base}/login/oauth/authorize`);
    assert.equal(location.searchParams.get('client_id'), 'client-1');
    const state = location.searchParams.get('state')!;
    const stateCookie = start.cookies.find((c) => c.name === 'paddock_oauth_state')!;
    assert.equal(stateCookie.value, state);
    const code = gh.approve(user);
    return await t.app.inject({
      url: `/auth/oauth/github/callback?code=${code}&state=${tamper ? tamper(state) : state}`,
      headers: { cookie: `paddock_oauth_state=${stateCookie.value}` },
    });
  }

  it('offers the button only when configured', async () => {
    const res = await t.app.inject({ url: '/api/auth/providers' });
    assert.deepEqual(res.json().oauth, [{ id: 'github', url: '/auth/oauth/github' }]);
    const plain = await buildTestApp({ database: t.database });
    try {
      assert.deepEqual((await plain.app.inject({ url: '/api/auth/providers' })).json().oauth, []);
      assert.equal((await plain.app.inject({ url: '/auth/oauth/github' })).statusCode, 404);
    } finally {
      await plain.close();
    }
  });

  it('creates a verified account from the primary verified email and starts a session', async () => {
    const res = await signIn({
      id: 1,
      login: 'octo',
      emails: [
        { email: 'unverified@example.com', primary: false, verified: false },
        { email: 'octo@example.com', primary: true, verified: true },
      ],
    });
    assert.equal(res.statusCode, 303);
    assert.equal(res.headers.location, '/');
    const cookie = res.cookies.find((c) => c.name === 'paddock_session')!.value;
    const me = await t.app.inject({ url: '/api/auth/me', headers: { cookie: `paddock_session=${cookie}` } });
    assert.equal(me.json().email, 'octo@example.com');
    assert.equal(me.json().email_verified, true);
    assert.equal(me.json().has_password, false);
    // Password login against this OAuth-only account is an ordinary 401.
    const pw = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'octo@example.com', password: 'anything at all' },
    });
    assert.equal(pw.statusCode, 401);
  });

  it('links to an existing account only through a provider-verified email', async () => {
    const reg = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email: 'existing@example.com', password: 'existing passphrase' },
    });
    assert.equal(reg.statusCode, 201);
    const unverified = await signIn({
      id: 2,
      login: 'mallory',
      emails: [{ email: 'existing@example.com', primary: true, verified: false }],
    });
    assert.equal(unverified.statusCode, 303);
    assert.match(String(unverified.headers.location), /flash=forbidden/);
    assert.equal(
      unverified.cookies.find((c) => c.name === 'paddock_session'),
      undefined,
    );

    const verified = await signIn({
      id: 3,
      login: 'existing',
      emails: [{ email: 'Existing@Example.com', primary: true, verified: true }],
    });
    assert.equal(verified.headers.location, '/');
    const links = await auditRows(t, 'auth.oauth.linked');
    assert.equal(links.length, 1);
    const users = await t.deps.db
      .selectFrom('users')
      .select('id')
      .where('email', '=', 'existing@example.com')
      .execute();
    assert.equal(users.length, 1, 'linked, not duplicated');
  });

  it('drops the password of an unverified account it links to (no pre-hijacking)', async () => {
    // An attacker registered the victim's address with their own password and never verified it.
    const attackerPassword = 'attacker chosen passphrase';
    await t.deps.db
      .insertInto('users')
      .values({
        id: crypto.randomUUID(),
        email: 'victim@example.com',
        password_hash: await hashPassword(attackerPassword),
        email_verified_at: null,
      })
      .execute();
    const res = await signIn({
      id: 40,
      login: 'victim',
      emails: [{ email: 'victim@example.com', primary: true, verified: true }],
    });
    assert.equal(res.headers.location, '/');
    for (const url of ['/api/auth/login', '/api/auth/token']) {
      const attempt = await t.app.inject({
        method: 'POST',
        url,
        payload: { email: 'victim@example.com', password: attackerPassword },
      });
      assert.equal(attempt.statusCode, 401, `${url} with the unproven password`);
    }
  });

  it('refuses a callback whose state does not match the browser cookie', async () => {
    const res = await signIn(
      { id: 4, login: 'x', emails: [{ email: 'x@example.com', primary: true, verified: true }] },
      (s) => `${s}x`,
    );
    assert.equal(res.statusCode, 303);
    assert.match(String(res.headers.location), /flash=oauth_failed/);
    const noCookie = await t.app.inject({ url: '/auth/oauth/github/callback?code=abc&state=def' });
    assert.match(String(noCookie.headers.location), /flash=oauth_failed/);
    assert.ok(!t.logs.join('\n').includes('shh-secret'));
  });
});
