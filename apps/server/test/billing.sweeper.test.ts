// The trial sweeper (billing/trial-sweeper.job.ts), driven with a chosen `now`: the
// trial-ending mail 3 days before, the trial-expired mail once, a local trial that expired
// becomes canceled while one with a subscription keeps the processor's status; only in the
// crontab with billing on. And the retention of payment-processor events (90 days).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, beforeEach, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { trialSweeperJob } from '../src/billing/trial-sweeper.job.ts';
import { parseConfig } from '../src/config/config.ts';
import { SCHEDULED_JOBS } from '../src/jobs/schedule.ts';
import { retentionPruneJob } from '../src/upkeep/retention.job.ts';
import { buildTestApp, type TestApp, testEnv } from './helpers/app.ts';
import { billingRow, insertBillingRow, newId, queuedBillingMails } from './helpers/billing-events.ts';
import { createVerifiedUser } from './helpers/factories.ts';

const DAY = 86_400_000;
const MIN = 60_000;
const NOW = new Date('2026-06-15T06:17:00.000Z');
const at = (ms: number) => new Date(NOW.getTime() + ms);

let t: TestApp;
before(async () => {
  t = await buildTestApp({
    env: { BILLING_ENABLED: 'true', EMAIL_DELIVERY: '', SMTP_HOST: '127.0.0.1', SMTP_PORT: '9' },
  });
});
after(async () => {
  await t?.close();
});
beforeEach(async () => {
  await sql`DELETE FROM billing_accounts`.execute(t.deps.db);
  await sql`DELETE FROM graphile_worker._private_jobs`.execute(t.deps.db);
});

async function run(app: TestApp, now = NOW, dryRun = false) {
  const lines: string[] = [];
  const result = await trialSweeperJob.run({ deps: app.deps, now, dryRun, print: (l) => lines.push(l) });
  return { ...result, lines };
}

async function trial(
  trialEndsAt: Date | null,
  extra: { subscriptionId?: string; status?: 'trialing' | 'active' } = {},
) {
  const user = await createVerifiedUser(t.deps.db);
  await insertBillingRow(t.deps.db, user.id, {
    status: extra.status ?? 'trialing',
    trialEndsAt,
    ...(extra.subscriptionId ? { subscriptionId: extra.subscriptionId, customerId: newId('cus') } : {}),
  });
  return user.id;
}

const mails = async () => (await queuedBillingMails(t.deps.db)).map((m) => `${m.kind} ${m.userId}`).sort();

describe('the trial sweeper', () => {
  it('mails a trial ending within 3 days and an expired one, each once', async () => {
    const endingSoon = await trial(at(3 * DAY - MIN));
    const endingLater = await trial(at(3 * DAY + MIN));
    const expiredLocal = await trial(at(-MIN));
    const sub = newId('sub');
    const expiredWithSubscription = await trial(at(-DAY), { subscriptionId: sub });
    const legacy = await trial(null);
    const active = await trial(at(-DAY), { status: 'active' });

    const result = await run(t);
    assert.equal(result.failures, 0);
    assert.equal(result.acted, 3, result.lines.join('\n'));
    assert.equal(result.summary, 'mailed 1 ending and 2 expired trials');
    assert.deepEqual(
      await mails(),
      [
        `trial_ending ${endingSoon}`,
        `trial_expired ${expiredLocal}`,
        `trial_expired ${expiredWithSubscription}`,
      ].sort(),
    );
    assert.ok(
      result.lines.every((l) => !l.includes('@')),
      'lines name accounts by id, never by address',
    );

    const local = await billingRow(t.deps.db, expiredLocal);
    assert.equal(local.status, 'canceled', 'a local trial that expired is settled: no webhook will come');
    assert.equal(local.trial_expired_notified_at?.getTime(), NOW.getTime());
    assert.equal(
      (await billingRow(t.deps.db, expiredWithSubscription)).status,
      'trialing',
      'the processor owns the status of a subscription',
    );
    assert.equal(
      (await billingRow(t.deps.db, endingSoon)).trial_ending_notified_at?.getTime(),
      NOW.getTime(),
    );
    assert.equal((await billingRow(t.deps.db, endingLater)).trial_ending_notified_at, null);
    assert.equal(
      (await billingRow(t.deps.db, legacy)).status,
      'trialing',
      'a legacy row without a clock is left',
    );
    assert.equal((await billingRow(t.deps.db, active)).status, 'active');

    const again = await run(t);
    assert.equal(again.acted, 0, 'a second run mails nobody again');
    assert.equal((await mails()).length, 3);

    // The day the first trial ends, it gets its expired mail (and only that).
    const later = await run(t, at(3 * DAY));
    assert.equal(later.summary, 'mailed 1 ending and 1 expired trials');
    assert.ok(later.lines.some((l) => l.includes(endingSoon) && l.includes('expired')));
    assert.ok(later.lines.some((l) => l.includes(endingLater) && l.includes('ending')));
  });

  it('a dry run counts and changes nothing', async () => {
    const soon = await trial(at(DAY));
    const expired = await trial(at(-DAY));
    const result = await run(t, NOW, true);
    assert.equal(result.acted, 2);
    assert.equal(result.summary, 'would mail 1 ending and 1 expired trials');
    assert.deepEqual(await mails(), []);
    assert.equal((await billingRow(t.deps.db, soon)).trial_ending_notified_at, null);
    assert.equal((await billingRow(t.deps.db, expired)).status, 'trialing');
  });

  it('two sweeps at once mail each account once between them', async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => trial(at(i % 2 === 0 ? DAY : -DAY))));
    const [a, b] = await Promise.all([run(t), run(t)]);
    assert.equal(a.acted + b.acted, 20);
    const queued = await mails();
    assert.equal(queued.length, 20);
    assert.equal(new Set(queued.map((m) => m.split(' ')[1])).size, 20);
    assert.ok(ids.every((id) => queued.some((m) => m.endsWith(id))));
  });

  it('is in the crontab only with billing on, and does nothing with billing off', async () => {
    assert.ok(SCHEDULED_JOBS.includes(trialSweeperJob), 'listed for the crontab and the release task');
    const on = parseConfig(testEnv({ BILLING_ENABLED: 'true' })).config;
    const off = parseConfig(testEnv({ BILLING_ENABLED: 'false' })).config;
    assert.equal(trialSweeperJob.scheduled?.(on), true);
    assert.equal(trialSweeperJob.scheduled?.(off), false);
    const offApp = await buildTestApp({ database: t.database, env: { BILLING_ENABLED: 'false' } });
    try {
      const expired = await trial(at(-DAY));
      const result = await run(offApp);
      assert.equal(result.acted, 0);
      assert.match(result.summary, /disabled/);
      assert.equal((await billingRow(t.deps.db, expired)).status, 'trialing');
    } finally {
      await offApp.app.close();
    }
  });
});

describe('the trial-sweeper release task', () => {
  it('runs as its own process: paddock-server task trial-sweeper --dry-run', async () => {
    const expired = await trial(new Date(Date.now() - DAY));
    const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
    const env = {
      PATH: process.env['PATH'] ?? '',
      NODE_ENV: 'test',
      DATABASE_URL: t.database.url,
      DATABASE_SSL: 'false',
      MASTER_SECRETS_KEY: t.config.masterSecretsKey?.toString('base64url') ?? '',
      EMAIL_DELIVERY: '',
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: '9',
      BILLING_ENABLED: 'true',
      LOG_LEVEL: 'silent',
    };
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [main, 'task', 'trial-sweeper', '--dry-run'],
        { env },
        (err, stdout, stderr) =>
          resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /would mail 0 ending and 1 expired trials/);
    assert.equal((await billingRow(t.deps.db, expired)).status, 'trialing', 'a dry run changes nothing');
  });
});

describe('the retention of payment-processor events', () => {
  it('deletes billing events received more than 90 days ago and keeps the rest', async () => {
    await sql`DELETE FROM billing_events`.execute(t.deps.db);
    const row = (id: string, receivedAt: Date) => ({
      id,
      type: 'invoice.paid',
      created_at: receivedAt,
      received_at: receivedAt,
    });
    await t.deps.db
      .insertInto('billing_events')
      .values([
        row('evt_past', at(-90 * DAY - MIN)),
        row('evt_inside', at(-90 * DAY + MIN)),
        row('evt_new', at(-MIN)),
      ])
      .execute();
    const lines: string[] = [];
    const result = await retentionPruneJob.run({
      deps: t.deps,
      now: NOW,
      dryRun: false,
      print: (l) => lines.push(l),
    });
    assert.equal(result.failures, 0, lines.join('\n'));
    assert.ok(lines.includes('deleted 1 payment-processor events older than 90 days'), lines.join('\n'));
    const left = await t.deps.db.selectFrom('billing_events').select('id').orderBy('id').execute();
    assert.deepEqual(
      left.map((r) => r.id),
      ['evt_inside', 'evt_new'],
    );
  });
});
