// The acceptance flow over HTTP with real mail: register → mail captured by a loopback SMTP
// server → verify → login → cookie rotated → mint key → /me → reset password → old
// sessions gone → revoke key → 401. Then: no secret in any log line or audit row.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { JobRunner } from '../src/jobs/worker.ts';
import { auditRows, browser, sessionCookie, startJobs } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createSmtpCapture, type SmtpCapture, tokenFrom } from './helpers/smtp.ts';

describe('account lifecycle over HTTP with SMTP delivery', () => {
  let t: TestApp;
  let smtp: SmtpCapture;
  let jobs: JobRunner;
  const secrets: string[] = [];
  const email = 'Ada.Lovelace@Example.com';
  const password = 'analytical engine 1843';
  const newPassword = 'difference engine 1822';

  before(async () => {
    smtp = await createSmtpCapture();
    t = await buildTestApp({
      env: {
        EMAIL_DELIVERY: '',
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(smtp.port),
        EMAIL_FROM: 'Paddock <paddock@example.com>',
        SUPPORT_EMAIL: 'support@example.com',
        PUBLIC_URL: 'http://paddock.test',
      },
    });
    jobs = await startJobs(t);
    secrets.push(password, newPassword);
  });
  after(async () => {
    await jobs.stop();
    await t.close();
    await smtp.stop();
  });

  it('runs the whole flow', async () => {
    const origin = { origin: 'http://paddock.test' };
    const reg = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email, password },
    });
    assert.equal(reg.statusCode, 201, reg.body);
    assert.equal(reg.json().can_sign_in_now, false);
    assert.equal(reg.json().user.email_verified, false);

    // Unverified: no login, no key.
    const early = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email, password },
    });
    assert.equal(early.statusCode, 403);
    assert.equal(early.json().error, 'email_not_verified');
    const earlyKey = await t.app.inject({
      method: 'POST',
      url: '/api/auth/token',
      payload: { email, password },
    });
    assert.equal(earlyKey.statusCode, 403);

    const verification = await smtp.waitFor(email, /Confirm your email/);
    assert.match(verification.decoded, /http:\/\/paddock\.test\/auth\/verify\?token=/);
    assert.match(verification.decoded, /Reply-To: support@example\.com/i);
    assert.equal(verification.from, 'paddock@example.com');
    const verifyToken = tokenFrom(verification);
    secrets.push(verifyToken);

    const verified = await t.app.inject({
      method: 'POST',
      url: '/api/auth/verify',
      payload: { token: verifyToken },
    });
    assert.equal(verified.statusCode, 200, verified.body);
    assert.equal(verified.json().user.email_verified, true);
    const again = await t.app.inject({
      method: 'POST',
      url: '/api/auth/verify',
      payload: { token: verifyToken },
    });
    assert.equal(again.statusCode, 422, 'a verification token works once');
    await smtp.waitFor(email, /account is ready/);

    // Login (email is case-insensitive), then log in again from the same browser: rotated.
    const login1 = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: origin,
      payload: { email: email.toLowerCase(), password },
    });
    assert.equal(login1.statusCode, 200, login1.body);
    const cookie1 = sessionCookie(login1);
    const setCookie = String(login1.headers['set-cookie']);
    assert.match(setCookie, /HttpOnly/);
    assert.match(setCookie, /SameSite=Lax/);
    assert.doesNotMatch(setCookie, /Secure/, 'http PUBLIC_URL: no Secure flag');
    assert.ok(Buffer.from(cookie1, 'base64url').length >= 16);
    const login2 = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: browser(t, cookie1),
      payload: { email, password },
    });
    const cookie2 = sessionCookie(login2);
    secrets.push(cookie1, cookie2);
    assert.notEqual(cookie2, cookie1);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, cookie1) })).statusCode, 401);
    const meCookie = await t.app.inject({ url: '/api/auth/me', headers: browser(t, cookie2) });
    assert.equal(meCookie.statusCode, 200);
    assert.equal(meCookie.json().auth.via, 'session');

    // Mint a key with email + password, use it.
    const minted = await t.app.inject({
      method: 'POST',
      url: '/api/auth/token',
      payload: { email, password, name: 'laptop' },
    });
    assert.equal(minted.statusCode, 201, minted.body);
    const key = minted.json().key as string;
    secrets.push(key);
    assert.match(key, /^pdk_/);
    const bearer = { authorization: `Bearer ${key}` };
    const me = await t.app.inject({ url: '/api/auth/me', headers: bearer });
    assert.equal(me.statusCode, 200);
    assert.equal(me.json().email, email);
    assert.equal(me.json().email_verified, true);
    assert.equal(me.json().is_admin, false);
    assert.equal(me.json().subscription_status, null);

    // Password reset: single-use token by mail, all sessions end.
    const resetReq = await t.app.inject({
      method: 'POST',
      url: '/api/auth/password-reset',
      payload: { email },
    });
    assert.equal(resetReq.statusCode, 202);
    const resetMail = await smtp.waitFor(email, /Reset your Paddock password/);
    const resetToken = tokenFrom(resetMail);
    secrets.push(resetToken);
    const weak = await t.app.inject({
      method: 'POST',
      url: '/api/auth/password-reset/confirm',
      payload: { token: resetToken, password: 'password1' },
    });
    assert.equal(weak.statusCode, 422);
    assert.ok(weak.json().errors.password);
    const reset = await t.app.inject({
      method: 'POST',
      url: '/api/auth/password-reset/confirm',
      payload: { token: resetToken, password: newPassword },
    });
    assert.equal(reset.statusCode, 200, reset.body);
    const reuse = await t.app.inject({
      method: 'POST',
      url: '/api/auth/password-reset/confirm',
      payload: { token: resetToken, password: newPassword },
    });
    assert.equal(reuse.statusCode, 422, 'a reset token works once');
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, cookie2) })).statusCode, 401);
    const oldPw = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email, password },
    });
    assert.equal(oldPw.statusCode, 401);
    const newLogin = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email, password: newPassword },
    });
    assert.equal(newLogin.statusCode, 200);
    secrets.push(sessionCookie(newLogin));

    // Revoke the key: it stops working.
    const list = await t.app.inject({ url: '/api/auth/api-keys', headers: bearer });
    assert.equal(list.statusCode, 200);
    const keyId = minted.json().id as string;
    assert.ok(
      list
        .json()
        .data.some((k: { id: string; prefix: string }) => k.id === keyId && key.startsWith(k.prefix)),
    );
    assert.ok(!JSON.stringify(list.json()).includes(key), 'the plaintext is never listed');
    const revoke = await t.app.inject({
      method: 'DELETE',
      url: `/api/auth/api-keys/${keyId}`,
      headers: bearer,
    });
    assert.equal(revoke.statusCode, 200);
    const after = await t.app.inject({ url: '/api/auth/me', headers: bearer });
    assert.equal(after.statusCode, 401);

    // Exactly one welcome mail.
    assert.equal(smtp.mails.filter((m) => /account is ready/.test(m.subject)).length, 1);

    // The audit trail has the story.
    const types = (await auditRows(t)).map((r) => r.type);
    for (const expected of [
      'user.registered',
      'user.email_verified',
      'auth.login.succeeded',
      'api_key.created',
      'user.password_reset_requested',
      'user.password_reset',
      'api_key.revoked',
      'auth.login.failed',
    ]) {
      assert.ok(types.includes(expected), `audit has ${expected}`);
    }
  });

  it('never writes a password, token, key or cookie to a log line or an audit row', async () => {
    assert.ok(secrets.length >= 8);
    const logs = t.logs.join('\n');
    assert.ok(logs.length > 0);
    const audit = JSON.stringify(await auditRows(t));
    for (const secret of secrets) {
      assert.ok(!logs.includes(secret), 'a secret reached the logs');
      assert.ok(!audit.includes(secret), 'a secret reached the audit log');
    }
  });
});
