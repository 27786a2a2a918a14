// The retention pruner (upkeep/retention.job.ts) and the throttle sweep
// (accounts/throttle-sweep.job.ts), driven with a chosen `now`: for every bound, a row a minute
// (a second, for the throttles) inside it stays and a row as far past it goes. Also the sandbox
// reaper of a server with no sandbox backend configured (this app has none).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { throttleSweepJob } from '../src/accounts/throttle-sweep.job.ts';
import { generateApiKey } from '../src/auth/api-key.ts';
import { sandboxReaperJob } from '../src/conversations/engine/sandbox-reaper.job.ts';
import type { ScheduledJob } from '../src/jobs/scheduled-job.ts';
import { PRUNABLE } from '../src/upkeep/prunable.ts';
import { prune, retentionPruneJob } from '../src/upkeep/retention.job.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { insertConversation, insertTurn } from './helpers/conversation-rows.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

const DAY = 86_400_000;
const MIN = 60_000;
/** The run's `now`; every row's timestamp is placed relative to it. */
const NOW = new Date('2026-06-15T04:23:00.000Z');
const at = (ms: number) => new Date(NOW.getTime() + ms);

let t: TestApp;
let user: TestUser;
let conversationId: string;

before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t?.close();
});
beforeEach(async () => {
  await sql`TRUNCATE log_events, audit_events, usage_events, login_failures, mail_sends`.execute(t.deps.db);
  await sql`DELETE FROM api_keys`.execute(t.deps.db);
  user = await createVerifiedUser(t.deps.db);
  conversationId = (await insertConversation(t.deps.db, user.id, { status: 'idle' })).id;
});

async function run(job: ScheduledJob, dryRun = false) {
  const lines: string[] = [];
  const result = await job.run({ deps: t.deps, now: NOW, dryRun, print: (l) => lines.push(l) });
  return { ...result, lines };
}

async function logEvent(createdAt: Date, text: string): Promise<void> {
  await t.deps.db
    .insertInto('log_events')
    .values({
      tenant_id: user.id,
      conversation_id: conversationId,
      stream: 'stdout',
      data: Buffer.from(text),
      created_at: createdAt,
    })
    .execute();
}

async function auditEvent(createdAt: Date, type: string): Promise<void> {
  await t.deps.db
    .insertInto('audit_events')
    .values({
      id: uuidv7(),
      tenant_id: user.id,
      type,
      actor_kind: 'system',
      metadata: '{}',
      created_at: createdAt,
    })
    .execute();
}

async function usageEvent(endedAt: Date): Promise<void> {
  await t.deps.db
    .insertInto('usage_events')
    .values({
      tenant_id: user.id,
      kind: 'turn',
      subject_id: uuidv7(),
      conversation_id: conversationId,
      status: 'succeeded',
      started_at: endedAt,
      ended_at: endedAt,
      busy_seconds: 0,
      parked_seconds: 0,
      created_at: endedAt,
    })
    .execute();
}
const usageCount = async () =>
  Number(
    (
      await t.deps.db
        .selectFrom('usage_events')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

async function apiKey(name: string, set: { revoked_at?: Date; expires_at?: Date }): Promise<void> {
  const { prefix, hash } = generateApiKey();
  await t.deps.db
    .insertInto('api_keys')
    .values({ id: uuidv7(), user_id: user.id, name, prefix, key_hash: hash, ...set })
    .execute();
}

const texts = async () =>
  (await t.deps.db.selectFrom('log_events').select('data').orderBy('id').execute()).map((r) =>
    r.data?.toString(),
  );
const auditTypes = async () =>
  (await t.deps.db.selectFrom('audit_events').select('type').orderBy('type').execute()).map((r) => r.type);
/** A turn with its recorded changes, created at `createdAt`; its prompt names it. */
async function turnChanges(createdAt: Date, seq: number): Promise<void> {
  const turnId = await insertTurn(t.deps.db, { id: conversationId, tenantId: user.id, epoch: '1' }, seq);
  await t.deps.db
    .insertInto('turn_changes')
    .values({
      turn_id: turnId,
      tenant_id: user.id,
      conversation_id: conversationId,
      status: 'recorded',
      start_trees: '{}',
      repositories: '[]',
      created_at: createdAt,
    })
    .execute();
}
const changedTurns = async () =>
  (
    await t.deps.db
      .selectFrom('turn_changes')
      .innerJoin('turns', 'turns.id', 'turn_changes.turn_id')
      .select('turns.seq')
      .orderBy('turns.seq')
      .execute()
  ).map((r) => r.seq);
const keyNames = async () =>
  (await t.deps.db.selectFrom('api_keys').select('name').orderBy('name').execute()).map((r) => r.name);

describe('the retention pruner', () => {
  it('deletes each kind of row just past its bound and keeps it just inside', async () => {
    await logEvent(at(-90 * DAY - MIN), 'past');
    await logEvent(at(-90 * DAY + MIN), 'inside');
    await logEvent(at(-MIN), 'recent');
    await turnChanges(at(-90 * DAY - MIN), 1);
    await turnChanges(at(-90 * DAY + MIN), 2);
    await auditEvent(at(-365 * DAY - MIN), 'audit.past');
    await auditEvent(at(-365 * DAY + MIN), 'audit.inside');
    await usageEvent(at(-400 * DAY - MIN));
    await usageEvent(at(-400 * DAY + MIN));
    await apiKey('revoked-past', { revoked_at: at(-30 * DAY - MIN) });
    await apiKey('revoked-inside', { revoked_at: at(-30 * DAY + MIN) });
    await apiKey('expired-past', { expires_at: at(-30 * DAY - MIN) });
    await apiKey('expired-inside', { expires_at: at(-30 * DAY + MIN) });
    // Revoked long ago though it expires later: the revocation is what counts.
    await apiKey('revoked-past-expires-later', { revoked_at: at(-31 * DAY), expires_at: at(DAY) });

    const result = await run(retentionPruneJob);
    assert.equal(result.failures, 0, result.lines.join('\n'));
    assert.deepEqual(await texts(), ['inside', 'recent']);
    assert.deepEqual(await changedTurns(), [2]);
    assert.deepEqual(await auditTypes(), ['audit.inside']);
    assert.deepEqual(await keyNames(), ['expired-inside', 'revoked-inside', 'test']);
    assert.equal(await usageCount(), 1, 'the usage event just inside 400 days is kept');
    assert.equal(result.acted, 7);
    assert.ok(result.lines.includes('deleted 1 log events older than 90 days'), result.lines.join('\n'));
    assert.ok(result.lines.includes('deleted 1 turn changes older than 90 days'), result.lines.join('\n'));
    assert.ok(result.lines.includes('deleted 1 audit events older than 365 days'));
    assert.ok(result.lines.includes('deleted 1 usage events older than 400 days'), result.lines.join('\n'));
    assert.ok(result.lines.includes('deleted 2 revoked API keys older than 30 days'));
    assert.ok(result.lines.includes('deleted 1 expired API keys older than 30 days'));

    const again = await run(retentionPruneJob);
    assert.equal(again.acted, 0, 'a second run finds nothing');
    assert.deepEqual(await texts(), ['inside', 'recent']);
  });

  it('a dry run counts what it would delete and deletes nothing', async () => {
    await logEvent(at(-91 * DAY), 'past');
    await logEvent(at(-89 * DAY), 'inside');
    const result = await run(retentionPruneJob, true);
    assert.equal(result.acted, 1);
    assert.ok(result.lines.includes('would delete 1 log events older than 90 days'));
    assert.deepEqual(await texts(), ['past', 'inside']);
  });

  it('deletes in bounded batches, each its own statement, until none is left', async () => {
    for (let i = 0; i < 7; i++) await logEvent(at(-100 * DAY + i * MIN), `old-${i}`);
    await logEvent(at(-DAY), 'new');
    const batches: number[] = [];
    const logLine = PRUNABLE.find((p) => p.table === 'log_events');
    assert.ok(logLine);
    const n = await prune(t.deps.db, logLine, NOW, { batchSize: 3, onBatch: (rows) => batches.push(rows) });
    assert.equal(n, 7);
    assert.deepEqual(batches, [3, 3, 1, 0]);
    assert.deepEqual(await texts(), ['new']);
  });

  it('two pruners at once delete every row once between them', async () => {
    for (let i = 0; i < 40; i++) await logEvent(at(-100 * DAY + i * MIN), `old-${i}`);
    const logLine = PRUNABLE.find((p) => p.table === 'log_events');
    assert.ok(logLine);
    const [a, b] = await Promise.all([
      prune(t.deps.db, logLine, NOW, { batchSize: 4 }),
      prune(t.deps.db, logLine, NOW, { batchSize: 4 }),
    ]);
    assert.equal(a + b, 40);
    assert.deepEqual(await texts(), []);
  });
});

describe('the throttle sweep', () => {
  it('deletes ended sign-in failure windows and mail sends older than the hour, keeps the rest', async () => {
    const windowMs = t.deps.config.rateLimit.loginFailureWindowSeconds * 1000;
    const key = () => randomBytes(32);
    await t.deps.db
      .insertInto('login_failures')
      .values([
        { email_key: key(), failures: 3, window_started_at: at(-windowMs - 1000) },
        { email_key: key(), failures: 3, window_started_at: at(-windowMs + 1000) },
      ])
      .execute();
    await t.deps.db
      .insertInto('mail_sends')
      .values([
        { recipient_key: key(), sent_at: at(-3_600_000 - 1000) },
        { recipient_key: key(), sent_at: at(-3_600_000 + 1000) },
      ])
      .execute();

    const dry = await run(throttleSweepJob, true);
    assert.equal(dry.acted, 2);
    const count = async (table: 'login_failures' | 'mail_sends') =>
      Number(
        (await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(t.deps.db)).rows[0]
          ?.n,
      );
    assert.equal(await count('login_failures'), 2);

    const result = await run(throttleSweepJob);
    assert.equal(result.acted, 2);
    assert.deepEqual(result.lines, [
      'deleted 1 ended sign-in failure windows',
      'deleted 1 mail sends older than an hour',
    ]);
    assert.equal(await count('login_failures'), 1);
    assert.equal(await count('mail_sends'), 1);
    const kept = await t.deps.db.selectFrom('mail_sends').select('sent_at').executeTakeFirstOrThrow();
    assert.equal(kept.sent_at.getTime(), at(-3_600_000 + 1000).getTime());
  });
});

describe('the sandbox reaper without a sandbox backend', () => {
  it('says there is nothing to reconcile, and is no failure', async () => {
    assert.equal(t.deps.config.sandbox.baseUrl, undefined);
    const result = await run(sandboxReaperJob);
    assert.deepEqual(result, {
      acted: 0,
      failures: 0,
      summary: 'no sandbox backend is configured: nothing to reconcile',
      lines: ['no sandbox backend is configured (SANDBOX_BASE_URL): nothing to reconcile'],
    });
  });
});
