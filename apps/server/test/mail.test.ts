// Mail delivery through the durable job queue: an SMTP outage never fails the request and
// the mail arrives once the server is back; the HTTP provider speaks Postmark's API;
// suspension notices are re-checked at send time; email change mails both addresses.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { findUserByEmail } from '../src/accounts/accounts.repo.ts';
import { browser, sessionCookie, startJobs } from './helpers/accounts.ts';
import { buildTestApp } from './helpers/app.ts';
import { createVerifiedUser } from './helpers/factories.ts';
import { createSmtpCapture, tokenFrom } from './helpers/smtp.ts';

const password = 'correct horse battery staple 9';

describe('mail delivery', () => {
  const cleanups: Array<() => Promise<void>> = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('answers registration while SMTP is down and delivers once it is back', async () => {
    const smtp = await createSmtpCapture({ start: false });
    const t = await buildTestApp({
      env: {
        EMAIL_DELIVERY: '',
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(smtp.port),
        MAIL_RETRY_BASE_MS: '200',
        MAIL_MAX_ATTEMPTS: '50',
      },
    });
    const jobs = await startJobs(t);
    cleanups.push(async () => {
      await jobs.stop();
      await t.close();
      await smtp.stop();
    });
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email: 'outage@example.com', password },
    });
    assert.equal(res.statusCode, 201);
    // Let at least two attempts fail against the closed port.
    const deadline = Date.now() + 10_000;
    while (!t.logs.some((l) => l.includes('will retry') && l.includes('"attempt":2'))) {
      assert.ok(Date.now() < deadline, 'the mail job should have retried');
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(smtp.mails.length, 0);
    await smtp.start();
    const mail = await smtp.waitFor('outage@example.com', /Confirm your email/, 15_000);
    const verify = await t.app.inject({
      method: 'POST',
      url: '/api/auth/verify',
      payload: { token: tokenFrom(mail) },
    });
    assert.equal(verify.statusCode, 200, 'the token of the delivered mail works');
    // Only the delivered attempt left a token behind.
    const tokens = await t.deps.db.selectFrom('email_tokens').select('id').execute();
    assert.equal(tokens.length, 1);
  });

  it('sends through the HTTP provider (Postmark API) with the server token header', async () => {
    const received: Array<{
      headers: IncomingMessage['headers'];
      body: Record<string, string>;
      url?: string;
    }> = [];
    const provider = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({
          headers: req.headers,
          body: JSON.parse(Buffer.concat(chunks).toString()),
          url: req.url,
        });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ErrorCode: 0, Message: 'OK', MessageID: 'x' }));
      });
    });
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    const port = (provider.address() as AddressInfo).port;
    const t = await buildTestApp({
      env: {
        EMAIL_DELIVERY: '',
        EMAIL_PROVIDER_API_KEY: 'pm-server-token',
        EMAIL_PROVIDER_BASE_URL: `http://127.0.0.1:${port}`,
        EMAIL_FROM: 'paddock@example.com',
        SUPPORT_EMAIL: 'help@example.com',
      },
    });
    const jobs = await startJobs(t);
    cleanups.push(async () => {
      await jobs.stop();
      await t.close();
      await new Promise<void>((r) => provider.close(() => r()));
    });
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email: 'api@example.com', password },
    });
    assert.equal(res.statusCode, 201);
    const deadline = Date.now() + 10_000;
    while (received.length === 0) {
      assert.ok(Date.now() < deadline, 'the provider should have been called');
      await new Promise((r) => setTimeout(r, 50));
    }
    const [call] = received;
    assert.equal(call?.url, '/email');
    assert.equal(call?.headers['x-postmark-server-token'], 'pm-server-token');
    assert.equal(call?.body['To'], 'api@example.com');
    assert.equal(call?.body['From'], 'paddock@example.com');
    assert.equal(call?.body['ReplyTo'], 'help@example.com');
    assert.match(call?.body['TextBody'] ?? '', /\/auth\/verify\?token=/);
    assert.match(call?.body['HtmlBody'] ?? '', /<a href=/);
    assert.ok(!t.logs.join('\n').includes('pm-server-token'), 'the provider key is never logged');
  });

  it('re-checks suspension at send time and mails both addresses on an email change', async () => {
    const smtp = await createSmtpCapture();
    const t = await buildTestApp({
      env: { EMAIL_DELIVERY: '', SMTP_HOST: '127.0.0.1', SMTP_PORT: String(smtp.port) },
    });
    cleanups.push(async () => {
      await t.close();
      await smtp.stop();
    });
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const target = await createVerifiedUser(t.deps.db);
    // Suspend then unsuspend before any job runs: only the unsuspension notice is still true.
    for (const action of ['suspend', 'unsuspend']) {
      const res = await t.app.inject({
        method: 'POST',
        url: `/api/admin/users/${target.id}/${action}`,
        headers: admin.auth,
      });
      assert.equal(res.statusCode, 200, res.body);
    }

    // Email change of a password user: confirmation to the new address, notice to the old.
    const user = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email: 'old@example.com', password },
    });
    assert.equal(user.statusCode, 201);
    await t.deps.db
      .updateTable('users')
      .set({ email_verified_at: new Date() })
      .where('email', '=', 'old@example.com')
      .execute();
    const login = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'old@example.com', password },
    });
    const cookie = sessionCookie(login);
    const wrong = await t.app.inject({
      method: 'POST',
      url: '/api/auth/email',
      headers: browser(t, cookie),
      payload: { current_password: 'not the password', new_email: 'new@example.com' },
    });
    assert.equal(wrong.statusCode, 422);
    const change = await t.app.inject({
      method: 'POST',
      url: '/api/auth/email',
      headers: browser(t, cookie),
      payload: { current_password: password, new_email: 'new@example.com' },
    });
    assert.equal(change.statusCode, 202, change.body);
    assert.equal(change.json().status, 'confirmation_sent');

    const jobs = await startJobs(t);
    cleanups.push(() => jobs.stop());
    await smtp.waitFor(target.email, /reinstated/);
    const confirm = await smtp.waitFor('new@example.com', /Confirm your new email/);
    await smtp.waitFor('old@example.com', /being changed/);
    assert.equal(
      smtp.mails.filter((m) => /suspended/.test(m.subject)).length,
      0,
      'stale suspension notice skipped',
    );

    const done = await t.app.inject({
      method: 'POST',
      url: '/api/auth/email/confirm',
      payload: { token: tokenFrom(confirm) },
    });
    assert.equal(done.statusCode, 200, done.body);
    assert.equal(done.json().user.email, 'new@example.com');
    assert.equal(await findUserByEmail(t.deps.db, 'old@example.com'), undefined);
  });
});
