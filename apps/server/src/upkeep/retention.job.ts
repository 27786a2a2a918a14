// The retention pruner (04:23 daily): deletes each PRUNABLE line's rows older than its bound.
// What must hold (upkeep.retention.test.ts; npm run bench: bench-retention.ts):
// 1. A row is deleted once `now` is past its timestamp plus the bound, never before: just
//    inside the bound it stays.
// 2. Bounded batches: each DELETE is one statement of at most `batchSize` rows in its own
//    transaction, so a backlog (a first run over years of rows) never holds a long lock or a
//    long transaction, and the writes of live conversations go on between batches.
// 3. Safe twice and beside itself (the task beside the cron run): a batch picks its rows with
//    SKIP LOCKED, so two pruners take different rows, and a table is done when a batch finds none.
// 4. `dryRun` counts what a real run would delete and deletes nothing.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { JobRunContext, ScheduledJob } from '../jobs/scheduled-job.ts';
import { PRUNABLE, type Prunable } from './prunable.ts';

export const RETENTION_BATCH = 1000;
const DAY_MS = 86_400_000;

export interface PruneOptions {
  dryRun?: boolean;
  batchSize?: number;
  /** Called after each batch with its row count and duration (the benchmark's longest transaction). */
  onBatch?(rows: number, ms: number): void;
}

/** Deletes (or with dryRun counts) the rows of one line that are past their bound at `now`. */
export async function prune(db: Db, line: Prunable, now: Date, options: PruneOptions = {}): Promise<number> {
  const cutoff = new Date(now.getTime() - line.keepDays * DAY_MS);
  const table = sql.table(line.table);
  const key = sql.ref(line.key);
  const column = sql.ref(line.column);
  const extra = line.where ? sql`AND (${sql.raw(line.where)})` : sql``;
  if (options.dryRun) {
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM ${table} WHERE ${column} < ${cutoff} ${extra}`.execute(db);
    return rows[0]?.n ?? 0;
  }
  const batchSize = options.batchSize ?? RETENTION_BATCH;
  let total = 0;
  for (;;) {
    const t0 = performance.now();
    const res = await sql`
      DELETE FROM ${table} WHERE ${key} IN (
        SELECT ${key} FROM ${table} WHERE ${column} < ${cutoff} ${extra}
         ORDER BY ${column} LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)`.execute(db);
    const rows = Number(res.numAffectedRows ?? 0n);
    options.onBatch?.(rows, performance.now() - t0);
    total += rows;
    if (rows === 0) return total;
  }
}

export const retentionPruneJob: ScheduledJob = {
  name: 'retention-prune',
  description: 'Deletes log, audit and other records past their retention (docs/upkeep.md)',
  crontab: '23 4 * * *',
  async run({ deps, now, dryRun, print }: JobRunContext) {
    let acted = 0;
    let failures = 0;
    const parts: string[] = [];
    for (const line of PRUNABLE) {
      try {
        const n = await prune(deps.db, line, now, { dryRun });
        acted += n;
        parts.push(`${n.toLocaleString('en-US')} ${line.what}`);
        print(
          `${dryRun ? 'would delete' : 'deleted'} ${n.toLocaleString('en-US')} ${line.what} older than ${line.keepDays} days`,
        );
      } catch (err) {
        failures += 1;
        print(`pruning ${line.what} failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    return { acted, failures, summary: `${dryRun ? 'would delete' : 'deleted'} ${parts.join(', ')}` };
  },
};
