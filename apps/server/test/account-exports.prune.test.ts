// The expired-export pruner (account-exports.prune.ts) against a real PostgreSQL, driven with a
// chosen instant: only exports past their expiry go, with their payload; a dry run deletes nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { pruneExpiredExportsJob } from '../src/account-exports/account-exports.prune.ts';
import { SCHEDULED_JOBS } from '../src/jobs/schedule.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

describe('expired-export pruner', () => {
  it('deletes exports past their expiry with their chunks, leaves the rest, and dry-runs without deleting', async () => {
    assert.ok(SCHEDULED_JOBS.includes(pruneExpiredExportsJob), 'listed for the crontab and the release task');
    const user = await createVerifiedUser(t.deps.db);
    const now = new Date('2030-01-10T12:00:00Z');
    const at = (hours: number) => new Date(now.getTime() + hours * 3600_000);
    const rows = {
      expired: { id: uuidv7(), status: 'ready' as const, expires_at: at(-1) },
      expiredFailed: { id: uuidv7(), status: 'failed' as const, expires_at: at(-48) },
      current: { id: uuidv7(), status: 'ready' as const, expires_at: at(1) },
      building: { id: uuidv7(), status: 'building' as const, expires_at: null },
    };
    for (const r of Object.values(rows)) {
      await t.deps.db
        .insertInto('account_exports')
        .values({ ...r, tenant_id: user.id, size_bytes: r.status === 'ready' ? 5 : null })
        .execute();
    }
    for (const id of [rows.expired.id, rows.current.id]) {
      await t.deps.db
        .insertInto('account_export_chunks')
        .values({ export_id: id, seq: 1, data: Buffer.from('chunk') })
        .execute();
    }
    const left = async () =>
      (await t.deps.db.selectFrom('account_exports').select('id').where('tenant_id', '=', user.id).execute())
        .map((r) => r.id)
        .sort();
    const all = Object.values(rows)
      .map((r) => r.id)
      .sort();

    const printedDry: string[] = [];
    const dry = await pruneExpiredExportsJob.run({
      deps: t.deps,
      now,
      dryRun: true,
      print: (l) => printedDry.push(l),
    });
    assert.equal(dry.acted, 2);
    assert.equal(printedDry.filter((l) => l.startsWith('would delete export')).length, 2);
    assert.deepEqual(await left(), all, 'a dry run deletes nothing');

    const printed: string[] = [];
    const run = await pruneExpiredExportsJob.run({
      deps: t.deps,
      now,
      dryRun: false,
      print: (l) => printed.push(l),
    });
    assert.deepEqual([run.acted, run.failures], [2, 0]);
    assert.match(run.summary, /^deleted 2 expired exports/);
    assert.deepEqual(await left(), [rows.current.id, rows.building.id].sort());
    const chunks = await t.deps.db.selectFrom('account_export_chunks').select('export_id').execute();
    assert.deepEqual(
      chunks.map((c) => c.export_id),
      [rows.current.id],
      'the payload of the expired export went with it',
    );

    const again = await pruneExpiredExportsJob.run({ deps: t.deps, now, dryRun: false, print: () => {} });
    assert.equal(again.acted, 0, 'a second run finds nothing');
  });
});
