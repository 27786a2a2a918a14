// Issue 37, finding 5: an admin gets a locked-out person back in. With mail, a reset link (the
// one "Forgot password" sends); without, a generated temporary password shown once. Both are
// the admin's audited acts; neither leaks the secret into the audit log or the server's log.
// The real app, a real PostgreSQL, a real SMTP listener on loopback.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { auditRows, startJobs } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser } from './helpers/factories.ts';
import { createSmtpCapture, tokenFrom } from './helpers/smtp.ts';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

async function app(env: Record<string, string> = {}): Promise<TestApp> {
  const t = await buildTestApp({ env });
  cleanups.push(() => t.close());
  return t;
}

describe('admin password help (issue 37, finding 5)', () => {
  it('sets a temporary password shown once: the person signs in with it, audited without the secret', async () => {
    const t = await app();
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);
    const url = `/api/admin/users/${user.id}/temporary-password`;

    assert.equal((await t.app.inject({ method: 'POST', url, headers: user.auth })).statusCode, 403);
    const self = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${admin.id}/temporary-password`,
      headers: admin.auth,
    });
    assert.equal(self.statusCode, 422, self.body);
    const missing = await t.app.inject({
      method: 'POST',
      url: '/api/admin/users/0190a1b2-0000-7000-8000-000000000000/temporary-password',
      headers: admin.auth,
    });
    assert.equal(missing.statusCode, 404);

    const set = await t.app.inject({ method: 'POST', url, headers: admin.auth });
    assert.equal(set.statusCode, 200, set.body);
    const { temporary_password: password, user: view } = set.json() as {
      temporary_password: string;
      user: { id: string };
    };
    assert.equal(view.id, user.id);
    assert.ok(password.length >= 20, password);

    const signIn = await t.app.inject({
      method: 'POST',
      url: '/api/auth/token',
      payload: { email: user.email, password },
    });
    assert.equal(signIn.statusCode, 201, signIn.body);
    // Its API keys stay: the account's automation keeps working.
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: user.auth })).statusCode, 200);

    const rows = (await auditRows(t, 'admin.user.password_set')).filter((r) => r.tenant_id === user.id);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.metadata['admin_user_id'], admin.id);
    assert.ok(!JSON.stringify(rows).includes(password), 'the password is not in the audit log');
    assert.ok(!t.logs.join('').includes(password), 'the password is not in the server log');

    // A second one replaces the first.
    const again = await t.app.inject({ method: 'POST', url, headers: admin.auth });
    const old = await t.app.inject({
      method: 'POST',
      url: '/api/auth/token',
      payload: { email: user.email, password },
    });
    assert.equal(again.statusCode, 200);
    assert.equal(old.statusCode, 401, old.body);
  });

  it('refuses to promise a reset link where no mail can be made, naming the way that works', async () => {
    const t = await app(); // NODE_ENV=test, EMAIL_DELIVERY=none: no mail is made
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${user.id}/password-reset`,
      headers: admin.auth,
    });
    assert.equal(res.statusCode, 409, res.body);
    assert.equal(res.json().error, 'mail_unavailable');
    assert.match(res.json().message, /temporary password/);
    assert.equal((await auditRows(t, 'admin.user.password_reset_sent')).length, 0);
    // "Forgot password" says so too, instead of promising a link that never comes.
    const forgot = await t.app.inject({
      method: 'POST',
      url: '/api/auth/password-reset',
      payload: { email: user.email },
    });
    assert.equal(forgot.statusCode, 202);
    assert.match(forgot.json().message, /sends no mail\. Ask an administrator/);
  });

  it('mails a reset link that sets a new password, audited as the admin’s act', async () => {
    const smtp = await createSmtpCapture();
    cleanups.push(() => smtp.stop());
    const t = await app({ EMAIL_DELIVERY: '', SMTP_HOST: '127.0.0.1', SMTP_PORT: String(smtp.port) });
    const jobs = await startJobs(t);
    cleanups.push(() => jobs.stop());
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);

    const refused = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${user.id}/password-reset`,
      headers: user.auth,
    });
    assert.equal(refused.statusCode, 403);
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${user.id}/password-reset`,
      headers: admin.auth,
    });
    assert.equal(res.statusCode, 202, res.body);
    const mail = await smtp.waitFor(user.email, /Reset your Paddock password/, 15_000);
    const confirm = await t.app.inject({
      method: 'POST',
      url: '/api/auth/password-reset/confirm',
      payload: { token: tokenFrom(mail), password: 'a fresh passphrase 37!' },
    });
    assert.equal(confirm.statusCode, 200, confirm.body);
    const rows = (await auditRows(t, 'admin.user.password_reset_sent')).filter(
      (r) => r.tenant_id === user.id,
    );
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.metadata['admin_user_id'], admin.id);
  });
});
