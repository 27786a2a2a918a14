// Account security over HTTP, each finding of issue 14 (accounts part) written as the
// attack and asserting it fails: takeovers that outlive a reset, existence oracles, mail
// scanners burning links, email-change races, weak passwords, sign-in guessing and mail
// floods, and silently dropped body fields. Real PostgreSQL, real SMTP on loopback, the
// real job runner.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { insertEmailToken, setEmail } from '../src/accounts/accounts.repo.ts';
import { PASSWORD_RESET_TTL_MS } from '../src/accounts/accounts.service.ts';
import type { JobRunner } from '../src/jobs/worker.ts';
import { auditRows, browser, sessionCookie, startJobs } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createSmtpCapture, type SmtpCapture, tokenFrom } from './helpers/smtp.ts';

const password = 'a perfectly fine passphrase';
const newPassword = 'an entirely new passphrase';

function smtpEnv(smtp: SmtpCapture): Record<string, string> {
  return {
    EMAIL_DELIVERY: '',
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(smtp.port),
    EMAIL_FROM: 'paddock@example.com',
    PUBLIC_URL: 'http://paddock.test',
  };
}

function uniqueEmail(name: string): string {
  return `${name}-${randomBytes(3).toString('hex')}@example.com`;
}

/** A registered, verified password account; returns a signed-in session cookie. */
async function verifiedAccount(t: TestApp, email: string, pw = password): Promise<string> {
  const reg = await t.app.inject({
    method: 'POST',
    url: '/api/auth/register',
    payload: { email, password: pw },
  });
  assert.equal(reg.statusCode, 201, reg.body);
  await t.deps.db
    .updateTable('users')
    .set({ email_verified_at: new Date() })
    .where('email', '=', email)
    .execute();
  return await signIn(t, email, pw);
}

async function signIn(t: TestApp, email: string, pw = password): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/auth/login',
    payload: { email, password: pw },
  });
  assert.equal(res.statusCode, 200, res.body);
  return sessionCookie(res);
}

async function post(t: TestApp, url: string, payload: unknown, headers: Record<string, string> = {}) {
  return await t.app.inject({ method: 'POST', url, headers, payload: payload as Record<string, unknown> });
}

async function pendingJobs(t: TestApp): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM graphile_worker.jobs`.execute(
    t.deps.db,
  );
  return Number(rows[0]?.n ?? 0);
}

async function drained(t: TestApp, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await pendingJobs(t)) > 0) {
    if (Date.now() > deadline) throw new Error('mail jobs did not drain');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function mailsTo(smtp: SmtpCapture, to: string, subject: RegExp) {
  return smtp.mails.filter(
    (m) => m.to.some((r) => r.toLowerCase() === to.toLowerCase()) && subject.test(m.subject),
  );
}

async function emailOf(t: TestApp, userId: string): Promise<string> {
  const row = await t.deps.db
    .selectFrom('users')
    .select('email')
    .where('id', '=', userId)
    .executeTakeFirstOrThrow();
  return row.email;
}

async function userIdOf(t: TestApp, email: string): Promise<string> {
  const row = await t.deps.db
    .selectFrom('users')
    .select('id')
    .where('email', '=', email)
    .executeTakeFirstOrThrow();
  return row.id;
}

function location(res: LightMyRequestResponse): string {
  return String(res.headers.location);
}

describe('finding 2: a password reset or change ends a takeover in progress', () => {
  let t: TestApp;
  let smtp: SmtpCapture;
  let jobs: JobRunner;
  before(async () => {
    smtp = await createSmtpCapture();
    t = await buildTestApp({ env: smtpEnv(smtp) });
    jobs = await startJobs(t);
  });
  after(async () => {
    await jobs.stop();
    await t.close();
    await smtp.stop();
  });

  async function resetPassword(email: string, payload: Record<string, unknown> = {}) {
    const before = mailsTo(smtp, email, /Reset your Paddock password/).length;
    assert.equal((await post(t, '/api/auth/password-reset', { email })).statusCode, 202);
    const deadline = Date.now() + 10_000;
    while (mailsTo(smtp, email, /Reset your Paddock password/).length === before) {
      if (Date.now() > deadline) throw new Error('no reset mail');
      await new Promise((r) => setTimeout(r, 50));
    }
    const token = tokenFrom(mailsTo(smtp, email, /Reset your Paddock password/).at(-1)!);
    return await post(t, '/api/auth/password-reset/confirm', { token, password: newPassword, ...payload });
  }

  it('refuses, after a reset, the email-change link a thief requested with the old password', async () => {
    const email = uniqueEmail('victim');
    const thiefAddress = uniqueEmail('thief');
    const stolenSession = await verifiedAccount(t, email);
    const userId = await userIdOf(t, email);
    const change = await post(
      t,
      '/api/auth/email',
      { current_password: password, new_email: thiefAddress },
      browser(t, stolenSession),
    );
    assert.equal(change.statusCode, 202, change.body);
    const link = tokenFrom(await smtp.waitFor(thiefAddress, /Confirm your new email/));

    const reset = await resetPassword(email);
    assert.equal(reset.statusCode, 200, reset.body);

    const viaApi = await post(t, '/api/auth/email/confirm', { token: link });
    assert.equal(viaApi.statusCode, 422);
    const viaLink = await t.app.inject({ url: `/auth/confirm-email?token=${link}` });
    assert.match(location(viaLink), /flash=email_change_link_invalid/);
    assert.equal(await emailOf(t, userId), email, 'the address stays the owner’s');
    const me = await t.app.inject({ url: '/api/auth/me', headers: browser(t, stolenSession) });
    assert.equal(me.statusCode, 401, 'the thief’s session ended');
  });

  it('never sends an email-change link still queued when the password was reset', async () => {
    const email = uniqueEmail('queued');
    const thiefAddress = uniqueEmail('thief-queued');
    await jobs.stop();
    try {
      const session = await verifiedAccount(t, email);
      const userId = await userIdOf(t, email);
      const change = await post(
        t,
        '/api/auth/email',
        { current_password: password, new_email: thiefAddress },
        browser(t, session),
      );
      assert.equal(change.statusCode, 202);
      // The owner resets before the queued mail goes out (token minted as the reset job would).
      const resetToken = randomBytes(32).toString('base64url');
      await insertEmailToken(t.deps.db, userId, {
        purpose: 'password_reset',
        token: resetToken,
        ttlMs: PASSWORD_RESET_TTL_MS,
      });
      const reset = await post(t, '/api/auth/password-reset/confirm', {
        token: resetToken,
        password: newPassword,
      });
      assert.equal(reset.statusCode, 200, reset.body);
    } finally {
      jobs = await startJobs(t);
    }
    await drained(t);
    await smtp.waitFor(email, /password was changed/);
    assert.equal(mailsTo(smtp, thiefAddress, /Confirm your new email/).length, 0, 'no link to the thief');
  });

  it('voids the other pending email-change links when one is confirmed', async () => {
    const email = uniqueEmail('two-changes');
    const first = uniqueEmail('first');
    const second = uniqueEmail('second');
    const session = await verifiedAccount(t, email);
    const userId = await userIdOf(t, email);
    for (const to of [first, second]) {
      const res = await post(
        t,
        '/api/auth/email',
        { current_password: password, new_email: to },
        browser(t, session),
      );
      assert.equal(res.statusCode, 202);
    }
    const firstToken = tokenFrom(await smtp.waitFor(first, /Confirm your new email/));
    const secondToken = tokenFrom(await smtp.waitFor(second, /Confirm your new email/));
    assert.equal((await post(t, '/api/auth/email/confirm', { token: firstToken })).statusCode, 200);
    const late = await post(t, '/api/auth/email/confirm', { token: secondToken });
    assert.equal(late.statusCode, 422);
    assert.equal(await emailOf(t, userId), first);
  });

  it('a password change ends every other session, keeps the caller’s, and voids pending reset and email-change links', async () => {
    const email = uniqueEmail('changer');
    const elsewhere = uniqueEmail('elsewhere');
    const mine = await verifiedAccount(t, email);
    const theirs = await signIn(t, email);
    assert.equal((await post(t, '/api/auth/password-reset', { email })).statusCode, 202);
    const resetToken = tokenFrom(await smtp.waitFor(email, /Reset your Paddock password/));
    await post(
      t,
      '/api/auth/email',
      { current_password: password, new_email: elsewhere },
      browser(t, theirs),
    );
    const changeToken = tokenFrom(await smtp.waitFor(elsewhere, /Confirm your new email/));

    const changed = await post(
      t,
      '/api/auth/password',
      { current_password: password, new_password: newPassword },
      browser(t, mine),
    );
    assert.equal(changed.statusCode, 200, changed.body);
    assert.equal(changed.json().sessions_ended, 1);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, mine) })).statusCode, 200);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, theirs) })).statusCode, 401);
    const reset = await post(t, '/api/auth/password-reset/confirm', {
      token: resetToken,
      password: 'a third passphrase',
    });
    assert.equal(reset.statusCode, 422);
    assert.equal((await post(t, '/api/auth/email/confirm', { token: changeToken })).statusCode, 422);
  });

  it('keeps API keys through a reset, lists them in the mail, and revokes them all on revoke_api_keys', async () => {
    const email = uniqueEmail('keys');
    const session = await verifiedAccount(t, email);
    const minted = await post(t, '/api/auth/token', { email, password, name: 'ci-runner' });
    assert.equal(minted.statusCode, 201, minted.body);
    const bearer = { authorization: `Bearer ${minted.json().key}` };

    const reset = await resetPassword(email);
    assert.equal(reset.statusCode, 200);
    assert.equal(reset.json().api_keys_revoked, 0);
    assert.equal(
      (await t.app.inject({ url: '/api/auth/me', headers: bearer })).statusCode,
      200,
      'keys survive',
    );
    const notice = await smtp.waitFor(email, /password was changed/);
    assert.match(notice.decoded, /ci-runner/);
    assert.ok(notice.decoded.includes(minted.json().prefix), 'the mail names the key by its prefix');
    assert.ok(!notice.decoded.includes(minted.json().key), 'never the key itself');
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: browser(t, session) })).statusCode, 401);

    const fresh = await signIn(t, email, newPassword);
    const change = await post(
      t,
      '/api/auth/password',
      { current_password: newPassword, new_password: 'yet another passphrase', revoke_api_keys: true },
      browser(t, fresh),
    );
    assert.equal(change.statusCode, 200, change.body);
    assert.equal(change.json().api_keys_revoked, 1);
    assert.equal((await t.app.inject({ url: '/api/auth/me', headers: bearer })).statusCode, 401);
    const revoked = await auditRows(t, 'api_key.revoked');
    assert.ok(
      revoked.some((r) => JSON.stringify(r.metadata).includes(minted.json().id)),
      'each revoked key is audited',
    );
  });
});

describe('finding 3: password-reset and resend-verification do the same work for any address', () => {
  let t: TestApp;
  let smtp: SmtpCapture;
  before(async () => {
    smtp = await createSmtpCapture();
    t = await buildTestApp({ env: smtpEnv(smtp) });
  });
  after(async () => {
    await t.close();
    await smtp.stop();
  });

  it('enqueues exactly one job of the same shape and writes nothing else, registered or not', async () => {
    const known = uniqueEmail('known');
    const reg = await post(t, '/api/auth/register', { email: known, password });
    assert.equal(reg.statusCode, 201);
    const unknown = uniqueEmail('unknown');
    for (const url of ['/api/auth/password-reset', '/api/auth/resend-verification']) {
      const shapes: string[] = [];
      for (const email of [known, unknown]) {
        const jobsBefore = await pendingJobs(t);
        const auditBefore = (await auditRows(t)).length;
        const res = await post(t, url, { email });
        assert.equal(res.statusCode, 202);
        assert.equal(
          await pendingJobs(t),
          jobsBefore + 1,
          `${url}: one job for ${email === known ? 'a registered' : 'an unknown'} address`,
        );
        assert.equal((await auditRows(t)).length, auditBefore, `${url}: no other write in the request`);
        const { rows } = await sql<{ payload: Record<string, unknown> }>`
          SELECT payload FROM graphile_worker._private_jobs ORDER BY id DESC LIMIT 1`.execute(t.deps.db);
        const payload = rows[0]!.payload;
        assert.equal(payload['email'], email);
        assert.equal(payload['userId'], undefined, 'the request never looked the account up');
        shapes.push(Object.keys(payload).sort().join(','));
      }
      assert.equal(shapes[0], shapes[1]);
    }
    // The job, not the request, tells the two apart: only the registered address gets mail.
    const jobs = await startJobs(t);
    try {
      await drained(t);
    } finally {
      await jobs.stop();
    }
    assert.equal(mailsTo(smtp, known, /Reset your Paddock password/).length, 1);
    assert.equal(mailsTo(smtp, unknown, /./).length, 0);
    assert.equal((await auditRows(t, 'user.password_reset_requested')).length, 1);
  });
});

describe('finding 4: an email change does not reveal registered addresses', () => {
  let t: TestApp;
  let smtp: SmtpCapture;
  let jobs: JobRunner;
  before(async () => {
    smtp = await createSmtpCapture();
    t = await buildTestApp({ env: smtpEnv(smtp) });
    jobs = await startJobs(t);
  });
  after(async () => {
    await jobs.stop();
    await t.close();
    await smtp.stop();
  });

  it('answers the same 202 for a registered and a free address, and tells the registered owner by mail', async () => {
    const prober = uniqueEmail('prober');
    const owner = uniqueEmail('owner');
    const free = uniqueEmail('free');
    const session = await verifiedAccount(t, prober);
    await verifiedAccount(t, owner);
    const taken = await post(
      t,
      '/api/auth/email',
      { current_password: password, new_email: owner },
      browser(t, session),
    );
    const open = await post(
      t,
      '/api/auth/email',
      { current_password: password, new_email: free },
      browser(t, session),
    );
    assert.equal(taken.statusCode, 202, taken.body);
    assert.equal(open.statusCode, 202);
    assert.deepEqual(taken.json(), open.json());
    const told = await smtp.waitFor(owner, /tried to move a Paddock account/);
    assert.doesNotMatch(told.decoded, /token=/, 'no link to the registered address');
    await smtp.waitFor(free, /Confirm your new email/);
    await drained(t);
    assert.equal(mailsTo(smtp, owner, /Confirm your new email/).length, 0);
    // The prober's own inbox sees the same notice for both, so it learns nothing either.
    assert.equal(mailsTo(smtp, prober, /being changed/).length, 2);
  });
});

describe('finding 6: mailed links and HEAD requests', () => {
  let t: TestApp;
  let smtp: SmtpCapture;
  let jobs: JobRunner;
  before(async () => {
    smtp = await createSmtpCapture();
    t = await buildTestApp({ env: smtpEnv(smtp) });
    jobs = await startJobs(t);
  });
  after(async () => {
    await jobs.stop();
    await t.close();
    await smtp.stop();
  });

  it('a HEAD never verifies; a second click says "already verified", not "invalid"', async () => {
    const email = uniqueEmail('scanned');
    assert.equal((await post(t, '/api/auth/register', { email, password })).statusCode, 201);
    const token = tokenFrom(await smtp.waitFor(email, /Confirm your email/));
    const head = await t.app.inject({ method: 'HEAD', url: `/auth/verify?token=${token}` });
    assert.ok(head.statusCode < 400, String(head.statusCode));
    const row = await t.deps.db
      .selectFrom('users')
      .select('email_verified_at')
      .where('email', '=', email)
      .executeTakeFirstOrThrow();
    assert.equal(row.email_verified_at, null, 'HEAD did not verify');
    const click = await t.app.inject({ url: `/auth/verify?token=${token}` });
    assert.match(location(click), /flash=email_verified$/);
    const again = await t.app.inject({ url: `/auth/verify?token=${token}` });
    assert.match(location(again), /flash=email_already_verified/);
    const forged = await t.app.inject({ url: '/auth/verify?token=not-a-real-token' });
    assert.match(location(forged), /flash=verification_link_invalid/);
  });

  it('a HEAD never confirms an email change; a second click says it already happened', async () => {
    const email = uniqueEmail('mover');
    const target = uniqueEmail('moved');
    const session = await verifiedAccount(t, email);
    const userId = await userIdOf(t, email);
    await post(t, '/api/auth/email', { current_password: password, new_email: target }, browser(t, session));
    const token = tokenFrom(await smtp.waitFor(target, /Confirm your new email/));
    await t.app.inject({ method: 'HEAD', url: `/auth/confirm-email?token=${token}` });
    assert.equal(await emailOf(t, userId), email, 'HEAD did not change the address');
    assert.match(
      location(await t.app.inject({ url: `/auth/confirm-email?token=${token}` })),
      /flash=email_changed$/,
    );
    assert.equal(await emailOf(t, userId), target);
    assert.match(
      location(await t.app.inject({ url: `/auth/confirm-email?token=${token}` })),
      /flash=email_already_changed/,
    );
  });

  it('counts a HEAD in its GET’s rate-limit bucket', async () => {
    const limited = await buildTestApp({ database: t.database, env: { AUTH_RATE_LIMIT_MAX: '2' } });
    try {
      const statuses: number[] = [];
      for (const method of ['HEAD', 'HEAD', 'GET'] as const) {
        statuses.push((await limited.app.inject({ method, url: '/auth/verify?token=x' })).statusCode);
      }
      assert.equal(statuses[2], 429, `statuses ${statuses.join(',')}`);
    } finally {
      await limited.close();
    }
  });
});

describe('finding 8: concurrent email changes to one address', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp();
  });
  after(async () => {
    await t.close();
  });

  it('maps the unique violation of a concurrent change to "taken", never an error carrying the address', async () => {
    const contested = uniqueEmail('contested');
    const a = await userIdOf(t, await registered(t, uniqueEmail('racer-a')));
    const b = await userIdOf(t, await registered(t, uniqueEmail('racer-b')));
    // A takes the address in an open transaction; B's write waits on the unique index and
    // loses when A commits.
    let releaseA!: () => void;
    const aHolds = new Promise<void>((r) => {
      releaseA = r;
    });
    let aWrote!: () => void;
    const aHasWritten = new Promise<void>((r) => {
      aWrote = r;
    });
    const txA = t.deps.db.transaction().execute(async (trx) => {
      assert.equal(await setEmail(trx, a, contested), true);
      aWrote();
      await aHolds;
    });
    await aHasWritten;
    const bResult = setEmail(t.deps.db, b, contested);
    await new Promise((r) => setTimeout(r, 100));
    releaseA();
    await txA;
    assert.equal(await bResult, false);
  });

  it('answers concurrent changes to one address with one 202 and 422s, and never logs the address', async () => {
    const contested = uniqueEmail('wanted');
    const sessions = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const email = await registered(t, uniqueEmail(`racer${i}`));
        return await signIn(t, email);
      }),
    );
    const answers = await Promise.all(
      sessions.map((cookie) =>
        post(t, '/api/auth/email', { current_password: password, new_email: contested }, browser(t, cookie)),
      ),
    );
    const statuses = answers.map((r) => r.statusCode).sort();
    assert.deepEqual(statuses, [202, 422, 422, 422, 422, 422], statuses.join(','));
    for (const r of answers.filter((x) => x.statusCode === 422)) assert.ok(r.json().errors.new_email);
    assert.ok(!t.logs.join('\n').includes(contested), 'the address reached a log line');
  });
});

/** Registered under EMAIL_DELIVERY=none: verified at once. */
async function registered(t: TestApp, email: string): Promise<string> {
  const res = await post(t, '/api/auth/register', { email, password });
  assert.equal(res.statusCode, 201, res.body);
  return email;
}

describe('finding 11: the email address is not a password', () => {
  let t: TestApp;
  let smtp: SmtpCapture;
  let jobs: JobRunner;
  before(async () => {
    smtp = await createSmtpCapture();
    t = await buildTestApp({ env: smtpEnv(smtp) });
    jobs = await startJobs(t);
  });
  after(async () => {
    await jobs.stop();
    await t.close();
    await smtp.stop();
  });

  it('refuses the email or its local part, in any case, at registration, change and reset', async () => {
    const email = 'Margaret.Hamilton@example.com';
    for (const pw of ['margaret.hamilton@EXAMPLE.com', 'MARGARET.HAMILTON']) {
      const res = await post(t, '/api/auth/register', { email, password: pw });
      assert.equal(res.statusCode, 422, res.body);
      assert.ok(res.json().errors.password, res.body);
    }
    const session = await verifiedAccount(t, email);
    const change = await post(
      t,
      '/api/auth/password',
      { current_password: password, new_password: 'margaret.hamilton' },
      browser(t, session),
    );
    assert.equal(change.statusCode, 422);
    assert.ok(change.json().errors.new_password);

    assert.equal((await post(t, '/api/auth/password-reset', { email })).statusCode, 202);
    const token = tokenFrom(await smtp.waitFor(email, /Reset your Paddock password/));
    const reset = await post(t, '/api/auth/password-reset/confirm', { token, password: 'Margaret.Hamilton' });
    assert.equal(reset.statusCode, 422);
    assert.ok(reset.json().errors.password);
    const ok = await post(t, '/api/auth/password-reset/confirm', { token, password: newPassword });
    assert.equal(ok.statusCode, 200, 'the refused attempt did not use up the link');
  });
});

describe('finding 12: sign-in guessing and mail floods', () => {
  let t: TestApp;
  let smtp: SmtpCapture;
  before(async () => {
    smtp = await createSmtpCapture();
    t = await buildTestApp({
      env: {
        ...smtpEnv(smtp),
        LOGIN_FAILURE_MAX: '3',
        LOGIN_FAILURE_WINDOW_SECONDS: '600',
        MAIL_PER_RECIPIENT_PER_HOUR: '3',
      },
    });
  });
  after(async () => {
    await t.close();
    await smtp.stop();
  });

  async function guess(url: string, email: string, pw: string, ip: string) {
    return await t.app.inject({ method: 'POST', url, remoteAddress: ip, payload: { email, password: pw } });
  }

  it('throttles failed sign-ins per address from any source, registered or not, on login and token', async () => {
    const known = uniqueEmail('guessed');
    await verifiedAccount(t, known);
    const unknown = uniqueEmail('nobody');
    const seen: Record<string, string[]> = {};
    for (const email of [known, unknown]) {
      const answers: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await guess('/api/auth/login', email, `wrong guess number ${i}`, `198.51.100.${i + 1}`);
        answers.push(`${r.statusCode} ${r.json().error}`);
      }
      const blocked = await guess('/api/auth/login', email, password, '203.0.113.9');
      answers.push(`${blocked.statusCode} ${blocked.json().error}`);
      assert.ok(Number(blocked.headers['retry-after']) > 0, 'Retry-After is set');
      const viaToken = await guess('/api/auth/token', email, password, '203.0.113.10');
      answers.push(`${viaToken.statusCode} ${viaToken.json().error}`);
      seen[email] = answers;
    }
    const expected = [
      '401 unauthorized',
      '401 unauthorized',
      '401 unauthorized',
      '429 rate_limited',
      '429 rate_limited',
    ];
    assert.deepEqual(seen[known], expected, 'even the right password is refused while blocked');
    assert.deepEqual(seen[unknown], expected, 'an unknown address answers exactly the same');
  });

  it('a successful password reset clears the throttle', async () => {
    const email = uniqueEmail('locked-out');
    await verifiedAccount(t, email);
    for (let i = 0; i < 3; i++) await guess('/api/auth/login', email, `wrong ${i} guess`, '198.51.100.50');
    assert.equal((await guess('/api/auth/login', email, password, '198.51.100.51')).statusCode, 429);
    const userId = await userIdOf(t, email);
    const token = randomBytes(32).toString('base64url');
    await insertEmailToken(t.deps.db, userId, {
      purpose: 'password_reset',
      token,
      ttlMs: PASSWORD_RESET_TTL_MS,
    });
    assert.equal(
      (await post(t, '/api/auth/password-reset/confirm', { token, password: newPassword })).statusCode,
      200,
    );
    assert.equal((await guess('/api/auth/login', email, newPassword, '198.51.100.52')).statusCode, 200);
  });

  it('counts auth routes against the global limit as well as their own', async () => {
    const tight = await buildTestApp({
      database: t.database,
      env: { RATE_LIMIT_MAX: '3', AUTH_RATE_LIMIT_MAX: '100' },
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        statuses.push(
          (
            await tight.app.inject({
              method: 'POST',
              url: '/api/auth/login',
              payload: { email: uniqueEmail('g'), password },
            })
          ).statusCode,
        );
      }
      assert.deepEqual(statuses, [401, 401, 401, 429]);
    } finally {
      await tight.close();
    }
  });

  it('caps mails per recipient per hour while answering every caller the same', async () => {
    const email = uniqueEmail('flooded');
    assert.equal((await post(t, '/api/auth/register', { email, password })).statusCode, 201);
    const answers = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const r = await post(t, '/api/auth/resend-verification', { email });
      answers.add(`${r.statusCode} ${r.body}`);
    }
    assert.equal(answers.size, 1);
    const jobs = await startJobs(t);
    try {
      await drained(t);
    } finally {
      await jobs.stop();
    }
    assert.equal(
      mailsTo(smtp, email, /Confirm your email/).length,
      3,
      'registration mail + 2 resends, then capped',
    );
    assert.ok(!t.logs.join('\n').includes(email), 'the dropped mails are logged without the address');
  });
});

describe('finding 14: account routes refuse unknown body fields', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp();
  });
  after(async () => {
    await t.close();
  });

  it('answers 422 naming the field on every account route with a body', async () => {
    const email = await registered(t, uniqueEmail('strict'));
    const cookie = await signIn(t, email);
    const routes: Array<[string, Record<string, unknown>]> = [
      ['/api/auth/register', { email: uniqueEmail('x'), password }],
      ['/api/auth/verify', { token: 'x' }],
      ['/api/auth/resend-verification', { email }],
      ['/api/auth/login', { email, password }],
      ['/api/auth/token', { email, password }],
      ['/api/auth/password', { current_password: password, new_password: newPassword }],
      ['/api/auth/password-reset', { email }],
      ['/api/auth/password-reset/confirm', { token: 'x', password: newPassword }],
      ['/api/auth/email', { current_password: password, new_email: uniqueEmail('y') }],
      ['/api/auth/email/confirm', { token: 'x' }],
      ['/api/auth/api-keys', { name: 'k' }],
    ];
    for (const [url, body] of routes) {
      const res = await post(t, url, { ...body, unexpected_field: 1 }, browser(t, cookie));
      assert.equal(res.statusCode, 422, `${url}: ${res.body}`);
      assert.match(JSON.stringify(res.json().errors), /unexpected_field/, url);
    }
  });

  it('a password change with a misspelled field changes nothing', async () => {
    const email = await registered(t, uniqueEmail('typo'));
    const cookie = await signIn(t, email);
    const res = await post(
      t,
      '/api/auth/password',
      { current_password: password, new_password: newPassword, revoke_api_key: true },
      browser(t, cookie),
    );
    assert.equal(res.statusCode, 422);
    assert.match(JSON.stringify(res.json().errors), /revoke_api_key/);
    await signIn(t, email, password);
  });
});
