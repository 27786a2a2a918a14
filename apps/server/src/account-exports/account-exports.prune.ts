// Deletes data exports past their expiry, payload and row (the chunks go by cascade). The
// retention pruner calls pruneExpiredExports; the scheduled job below runs it on its own
// until then. What must hold (test/account-exports.prune.test.ts):
// - Only exports whose expires_at has passed at `now` go; a pending, building or unexpired one stays.
// - dryRun deletes nothing and reports what a run would delete.
// - Idempotent: batches are re-checked against `now` at delete time, a second run finds nothing.
import type { Db } from '../db/database.ts';
import type { JobResult, ScheduledJob } from '../jobs/scheduled-job.ts';
import { deleteExpired, expiredExports } from './account-exports.repo.ts';

const BATCH = 500;

export async function pruneExpiredExports(ctx: {
  db: Db;
  now: Date;
  dryRun: boolean;
  print(line: string): void;
}): Promise<JobResult> {
  let acted = 0;
  let failures = 0;
  let bytes = 0;
  let after: string | null = null;
  for (;;) {
    const rows = await expiredExports(ctx.db, ctx.now, after, BATCH);
    const last = rows[rows.length - 1];
    if (!last) break;
    after = last.id;
    let deleted = rows.length;
    if (!ctx.dryRun) {
      try {
        deleted = await deleteExpired(
          ctx.db,
          rows.map((r) => r.id),
          ctx.now,
        );
      } catch {
        failures += rows.length;
        continue;
      }
    }
    for (const r of rows) {
      ctx.print(
        `${ctx.dryRun ? 'would delete' : 'deleted'} export ${r.id} (${Number(r.size_bytes ?? 0)} bytes)`,
      );
      bytes += Number(r.size_bytes ?? 0);
    }
    acted += deleted;
    if (rows.length < BATCH) break;
  }
  const verb = ctx.dryRun ? 'would delete' : 'deleted';
  return {
    acted,
    failures,
    summary: `${verb} ${acted.toLocaleString('en-US')} expired exports (${bytes.toLocaleString('en-US')} bytes)`,
  };
}

export const pruneExpiredExportsJob: ScheduledJob = {
  name: 'prune-expired-exports',
  description: 'Deletes data exports past their expiry (7 days after they are built), payload and all',
  // Hourly at :37: an expired export is gone within the hour.
  crontab: '37 * * * *',
  run: async ({ deps, now, dryRun, print }) => await pruneExpiredExports({ db: deps.db, now, dryRun, print }),
};
