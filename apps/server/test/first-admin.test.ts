// FIRST_USER_ADMIN: the first account to become verified while no admin exists is promoted,
// on verification (never registration), and exactly one wins under concurrency.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { insertEmailToken, insertUser } from '../src/accounts/accounts.repo.ts';
import { generateSecret } from '../src/auth/tokens.ts';
import { auditRows } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';

describe('first user admin', () => {
  let t: TestApp;
  before(async () => {
    // A real mail setting so registration does not self-verify; no job runner is needed.
    t = await buildTestApp({
      env: { EMAIL_DELIVERY: '', SMTP_HOST: '127.0.0.1', SMTP_PORT: '2', FIRST_USER_ADMIN: 'true' },
    });
  });
  after(async () => {
    await t.close();
  });

  it('does not promote on registration', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email: 'early@example.com', password: 'a long enough passphrase' },
    });
    assert.equal(res.statusCode, 201);
    assert.equal(res.json().user.is_admin, false);
  });

  it('promotes exactly one of 50 concurrent verifications, audited with a null actor', async () => {
    const tokens: string[] = [];
    for (let i = 0; i < 50; i++) {
      const user = await insertUser(t.deps.db, {
        email: `racer-${i}@example.com`,
        passwordHash: null,
        verified: false,
      });
      const token = generateSecret();
      await insertEmailToken(t.deps.db, user!.id, { purpose: 'verify_email', token, ttlMs: 60_000 });
      tokens.push(token);
    }
    const results = await Promise.all(
      tokens.map((token) => t.app.inject({ method: 'POST', url: '/api/auth/verify', payload: { token } })),
    );
    assert.deepEqual(
      results.map((r) => r.statusCode),
      tokens.map(() => 200),
    );
    const admins = await t.deps.db.selectFrom('users').select('id').where('is_admin', '=', true).execute();
    assert.equal(admins.length, 1);
    const grants = await auditRows(t, 'admin.role.granted');
    assert.equal(grants.length, 1);
    assert.equal(grants[0]?.actor_kind, 'system');
    assert.equal(grants[0]?.actor_user_id, null);
    assert.equal(grants[0]?.metadata['via'], 'first_user_admin');
    assert.equal(grants[0]?.tenant_id, admins[0]?.id);
    assert.equal(results.filter((r) => r.json().user.is_admin).length, 1);
  });

  it('promotes nobody once an admin exists', async () => {
    const user = await insertUser(t.deps.db, {
      email: 'late@example.com',
      passwordHash: null,
      verified: false,
    });
    const token = generateSecret();
    await insertEmailToken(t.deps.db, user!.id, { purpose: 'verify_email', token, ttlMs: 60_000 });
    const res = await t.app.inject({ method: 'POST', url: '/api/auth/verify', payload: { token } });
    assert.equal(res.json().user.is_admin, false);
    assert.equal((await auditRows(t, 'admin.role.granted')).length, 1);
  });
});
