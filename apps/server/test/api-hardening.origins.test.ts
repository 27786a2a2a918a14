// Issue 14, finding 5: in development with PUBLIC_URL unset, the URL the server prints
// (http://127.0.0.1:PORT) and every other loopback form of the listening address must be
// able to sign in; with PUBLIC_URL set, exactly its origin is same-origin.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { hashPassword } from '../src/accounts/password.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';

const PORT = 4719;
const PASSWORD = 'correct horse battery staple';

async function createUserWithPassword(t: TestApp): Promise<string> {
  const email = `origin-${uuidv7()}@example.com`;
  await t.deps.db
    .insertInto('users')
    .values({
      id: uuidv7(),
      email,
      password_hash: await hashPassword(PASSWORD),
      email_verified_at: new Date(),
      is_admin: false,
    })
    .execute();
  return email;
}

async function loginFrom(t: TestApp, email: string, origin: string) {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/auth/login',
    headers: { origin },
    payload: { email, password: PASSWORD },
  });
  return { status: res.statusCode, error: res.statusCode === 200 ? null : (res.json().error as string) };
}

describe('development, PUBLIC_URL unset (finding 5)', () => {
  let t: TestApp;
  let email: string;
  before(async () => {
    t = await buildTestApp({ env: { NODE_ENV: 'development', PORT: String(PORT), HOST: '127.0.0.1' } });
    email = await createUserWithPassword(t);
  });
  after(async () => {
    await t.close();
  });

  for (const origin of [`http://127.0.0.1:${PORT}`, `http://localhost:${PORT}`, `http://[::1]:${PORT}`]) {
    it(`signs in from ${origin}, a loopback form of the listening address`, async () => {
      assert.deepEqual(await loginFrom(t, email, origin), { status: 200, error: null });
    });
  }

  for (const origin of [
    `http://127.0.0.1:${PORT + 1}`,
    `https://127.0.0.1:${PORT}`,
    `http://127.0.0.2:${PORT}`,
    `http://localhost.evil.example:${PORT}`,
    'https://evil.example',
  ]) {
    it(`refuses a sign-in from ${origin} with 403 csrf_failed`, async () => {
      assert.deepEqual(await loginFrom(t, email, origin), { status: 403, error: 'csrf_failed' });
    });
  }
});

describe('PUBLIC_URL set (finding 5)', () => {
  let t: TestApp;
  let email: string;
  before(async () => {
    t = await buildTestApp({
      env: { NODE_ENV: 'development', PORT: String(PORT), PUBLIC_URL: 'http://paddock.example.com' },
    });
    email = await createUserWithPassword(t);
  });
  after(async () => {
    await t.close();
  });

  it('signs in from exactly the PUBLIC_URL origin', async () => {
    assert.deepEqual(await loginFrom(t, email, 'http://paddock.example.com'), { status: 200, error: null });
  });

  for (const origin of [
    `http://127.0.0.1:${PORT}`,
    `http://localhost:${PORT}`,
    `http://[::1]:${PORT}`,
    'https://paddock.example.com',
    'http://paddock.example.com:8080',
  ]) {
    it(`refuses a sign-in from ${origin} with 403 csrf_failed`, async () => {
      assert.deepEqual(await loginFrom(t, email, origin), { status: 403, error: 'csrf_failed' });
    });
  }
});
