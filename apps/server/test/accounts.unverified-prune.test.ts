// Issue 38, deliverables 4, 5 and 8: the unverified-account pruner, driven with a chosen `now`
// (src/accounts/unverified-prune.job.ts); the deletion hooks (where billing cancellation
// joins); and the deletion notice, which goes to a verified address only and leaves the
// address nowhere once sent.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { createAccountDeletion } from '../src/accounts/account-deletion.ts';
import { unverifiedPruneJob } from '../src/accounts/unverified-prune.job.ts';
import type { Deps } from '../src/deps.ts';
import { SCHEDULED_JOBS } from '../src/jobs/schedule.ts';
import { startJobs } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser } from './helpers/factories.ts';
import { createSmtpCapture, type SmtpCapture } from './helpers/smtp.ts';

const DAY_MS = 24 * 60 * 60 * 1000;
const NOW = new Date('2027-03-01T05:41:00.000Z');
const BOUND = new Date(NOW.getTime() - 30 * DAY_MS);

let t: TestApp;
let smtp: SmtpCapture;
before(async () => {
  smtp = await createSmtpCapture();
  t = await buildTestApp({
    env: {
      EMAIL_DELIVERY: '',
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: String(smtp.port),
      UNVERIFIED_PRUNE_AFTER_DAYS: '30',
      UNVERIFIED_PRUNE_EXEMPT: 'qa-robot@example.com, Keep@Example.com',
    },
  });
});
after(async () => {
  await t.close();
  await smtp.stop();
});

async function unverifiedUser(createdAt: Date, email?: string): Promise<{ id: string; email: string }> {
  const id = uuidv7();
  const address = email ?? `unverified-${randomBytes(4).toString('hex')}@example.com`;
  await t.deps.db
    .insertInto('users')
    .values({ id, email: address, password_hash: null, email_verified_at: null, created_at: createdAt })
    .execute();
  return { id, email: address };
}

async function exists(id: string): Promise<boolean> {
  return (
    (await t.deps.db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst()) !== undefined
  );
}

async function run(deps: Deps, dryRun: boolean) {
  const lines: string[] = [];
  const result = await unverifiedPruneJob.run({ deps, now: NOW, dryRun, print: (l) => lines.push(l) });
  return { ...result, lines };
}

async function jobsMentioning(needle: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    SELECT count(*) AS n FROM graphile_worker._private_jobs WHERE payload::text ILIKE ${`%${needle}%`}`.execute(
    t.deps.db,
  );
  return Number(rows[0]?.n ?? 0);
}

describe('the unverified-account pruner', () => {
  it('is listed as unverified-prune at 05:41 UTC daily', () => {
    const job = SCHEDULED_JOBS.find((j) => j.name === 'unverified-prune');
    assert.equal(job, unverifiedPruneJob);
    assert.equal(job?.crontab, '41 5 * * *');
  });

  it('deletes accounts unverified for the bound or longer; keeps younger, exempt and verified ones', async () => {
    const past = await unverifiedUser(new Date(BOUND.getTime() - 1000));
    const atBound = await unverifiedUser(BOUND);
    const inside = await unverifiedUser(new Date(BOUND.getTime() + 1000));
    const exempt = await unverifiedUser(new Date(BOUND.getTime() - 60 * DAY_MS), 'KEEP@example.com');
    const verified = await createVerifiedUser(t.deps.db);
    await t.deps.db
      .updateTable('users')
      .set({ created_at: new Date(BOUND.getTime() - 90 * DAY_MS) })
      .where('id', '=', verified.id)
      .execute();

    const dry = await run(t.deps, true);
    assert.equal(dry.acted, 2);
    assert.equal(dry.failures, 0);
    assert.deepEqual(
      dry.lines.map((l) => /account (\S+)/.exec(l)?.[1]),
      [past.id, atBound.id],
      'one line per account, oldest first',
    );
    assert.ok(
      dry.lines.every((l) => !l.includes('@')),
      'printed lines carry ids, never an address',
    );
    assert.match(dry.summary, /^would delete 2 unverified accounts/);
    assert.ok((await exists(past.id)) && (await exists(atBound.id)), 'a dry run deletes nothing');

    const real = await run(t.deps, false);
    assert.equal(real.acted, 2, real.lines.join('\n'));
    assert.equal(real.failures, 0);
    assert.match(real.summary, /^deleted 2 unverified accounts registered by 2027-01-30T05:41:00.000Z/);
    assert.equal(await exists(past.id), false);
    assert.equal(await exists(atBound.id), false);
    assert.equal(await exists(inside.id), true, 'one second inside the bound stays');
    assert.equal(await exists(exempt.id), true, 'an exempt address stays, whatever its case');
    assert.equal(await exists(verified.id), true);
    const records = await t.deps.db
      .selectFrom('audit_events')
      .selectAll()
      .where('tenant_id', 'in', [past.id, atBound.id])
      .execute();
    assert.deepEqual(
      records.map((r) => [r.type, r.actor_kind, r.metadata]),
      [0, 1].map(() => [
        'user.deleted',
        'system',
        { via: 'unverified_prune', conversations: 0, sandboxes: 0 },
      ]),
    );
    // A never-verified address gets no deletion notice.
    assert.equal(await jobsMentioning(past.email), 0);
    assert.equal(await jobsMentioning(atBound.email), 0);

    const again = await run(t.deps, false);
    assert.equal(again.acted, 0, 'a second run finds nothing more');
  });

  it('does nothing with UNVERIFIED_PRUNE_AFTER_DAYS=0', async () => {
    const old = await unverifiedUser(new Date(BOUND.getTime() - 365 * DAY_MS));
    const config = { ...t.deps.config, unverifiedPrune: { afterDays: 0, exempt: [] } };
    const off = await run({ ...t.deps, config }, false);
    assert.deepEqual([off.acted, off.failures, off.lines], [0, 0, []]);
    assert.match(off.summary, /disabled/);
    assert.equal(await exists(old.id), true);
    await run(t.deps, false);
    assert.equal(await exists(old.id), false, 'the same account goes once the pruner is on');
  });

  it('re-checks on the locked row: an account verified after it was listed is kept', async () => {
    const late = await unverifiedUser(new Date(BOUND.getTime() - DAY_MS));
    await t.deps.db
      .updateTable('users')
      .set({ email_verified_at: new Date() })
      .where('id', '=', late.id)
      .execute();
    assert.equal(await t.deps.accountDeletion.deleteUnverified(late.id, BOUND), false);
    assert.equal(await exists(late.id), true);
    const young = await unverifiedUser(new Date(BOUND.getTime() + 1));
    assert.equal(await t.deps.accountDeletion.deleteUnverified(young.id, BOUND), false);
    assert.equal(await exists(young.id), true);
  });
});

describe('deletion hooks', () => {
  it('run before the rows go, for an account that qualifies only; a failing one deletes nothing', async () => {
    const calls: string[] = [];
    let fail = true;
    const deletion = createAccountDeletion({
      db: t.deps.db,
      audit: t.deps.audit,
      mailQueue: t.deps.mailQueue,
      principals: t.deps.principals,
      conversations: t.deps.conversations,
      hooks: [
        {
          name: 'billing',
          async beforeDelete(userId) {
            calls.push(userId);
            if (fail) throw new Error('the payment processor is down');
          },
        },
      ],
    });
    const old = await unverifiedUser(new Date(BOUND.getTime() - DAY_MS));
    await assert.rejects(deletion.deleteUnverified(old.id, BOUND), /payment processor is down/);
    assert.equal(await exists(old.id), true, 'a failing hook stops the deletion before anything goes');
    const young = await unverifiedUser(new Date(BOUND.getTime() + DAY_MS));
    assert.equal(await deletion.deleteUnverified(young.id, BOUND), false);
    assert.deepEqual(calls, [old.id], 'no hook runs for an account that does not qualify');
    fail = false;
    assert.equal(await deletion.deleteUnverified(old.id, BOUND), true);
    assert.equal(await exists(old.id), false);
  });
});

describe('the deletion notice', () => {
  it('is mailed to a verified address once the account is gone, and the address is kept nowhere after', async () => {
    const jobs = await startJobs(t);
    try {
      const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
      const target = await createVerifiedUser(t.deps.db);
      const res = await t.app.inject({
        method: 'DELETE',
        url: `/api/admin/users/${target.id}`,
        headers: admin.auth,
      });
      assert.equal(res.statusCode, 200, res.body);
      const mail = await smtp.waitFor(target.email, /account has been deleted/, 15_000);
      assert.match(mail.decoded, /cannot be recovered/);
      const deadline = Date.now() + 10_000;
      while ((await jobsMentioning(target.email)) > 0) {
        assert.ok(Date.now() < deadline, 'the notice job completes');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(
        t.logs.every((l) => !l.includes(target.email)),
        'no log line carries the deleted address',
      );
    } finally {
      await jobs.stop();
    }
  });

  it('is retried while the mail server is down and arrives once it is back', async () => {
    const down = await createSmtpCapture({ start: false });
    const app = await buildTestApp({
      env: {
        EMAIL_DELIVERY: '',
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(down.port),
        MAIL_RETRY_BASE_MS: '200',
        MAIL_MAX_ATTEMPTS: '50',
      },
    });
    const jobs = await startJobs(app);
    try {
      const admin = await createVerifiedUser(app.deps.db, { isAdmin: true });
      const target = await createVerifiedUser(app.deps.db);
      const res = await app.app.inject({
        method: 'DELETE',
        url: `/api/admin/users/${target.id}`,
        headers: admin.auth,
      });
      assert.equal(res.statusCode, 200, res.body);
      const deadline = Date.now() + 10_000;
      while (!app.logs.some((l) => l.includes('will retry') && l.includes('"kind":"account_deleted"'))) {
        assert.ok(Date.now() < deadline, 'the notice should have been retried');
        await new Promise((r) => setTimeout(r, 50));
      }
      await down.start();
      await down.waitFor(target.email, /account has been deleted/, 15_000);
      assert.ok(
        app.logs.every((l) => !l.includes(target.email)),
        'no log line carries the address',
      );
    } finally {
      await jobs.stop();
      await app.close();
      await down.stop();
    }
  });
});
