// Retention pruner benchmark (issue 38): the pruner's log-event line (apps/server/src/upkeep/
// retention.job.ts, bounded batches) over a backlog of expired log rows (default 1,000,000,
// spread over 1,000 conversations, 90+ days old), while a live conversation's single log writer
// keeps writing beside it, as a turn would.
// Reported: the prune's time and rate, its longest single transaction (one batch: one DELETE
// statement), and the turn's write latency (output handed to the writer → committed, by flush())
// during the prune against the same writes measured just before it on the same database.
// Goals: the longest transaction stays well under a second whatever the backlog; the turn's p99
// during the prune stays within a few times its p99 without it (no write waits for the prune).
//
//   node scripts/bench-retention.ts [--rows 1000000] [--batch 5000] [--json out.json]
import { parseArgs } from 'node:util';
import type { LogWriter } from '../apps/server/src/conversations/contracts.ts';
import { createSecretRegistry } from '../apps/server/src/conversations/log/redactor.ts';
import { PRUNABLE } from '../apps/server/src/upkeep/prunable.ts';
import { prune, RETENTION_BATCH } from '../apps/server/src/upkeep/retention.job.ts';
import { insertConversation } from '../apps/server/test/helpers/conversation-rows.ts';
import { createVerifiedUser } from '../apps/server/test/helpers/factories.ts';
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { type Figure, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    /** The pruner's batch size (default: the pruner's own, RETENTION_BATCH). */
    batch: { type: 'string' },
    json: { type: 'string' },
  },
});
const rows = Number(values.rows);
if (!Number.isInteger(rows) || rows < 1000) throw new Error('--rows must be an integer ≥ 1000');
const batchSize = values.batch === undefined ? RETENTION_BATCH : Number(values.batch);
if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error('--batch must be a positive integer');

const CONVERSATIONS = 1000;
/** A log row's output: a batch of agent output is often a few hundred bytes. */
const ROW_BYTES = 256;
/** The turn: a 4 KiB chunk every 50 ms, each awaited to its commit. */
const TURN_CHUNK = 4096;
const TURN_INTERVAL_MS = 50;
const BASELINE_SECONDS = 10;

const percentile = (samples: number[], p: number): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

const scratch = await startScratchPostgres({ database: 'bench' });
try {
  const { deps, database, close } = await appOnDatabase(scratch.pg.url, { LOG_OUTPUT_BUDGET_MB: '0' });
  try {
    const user = await createVerifiedUser(database.db);
    const old: string[] = [];
    for (let i = 0; i < CONVERSATIONS; i++) old.push((await insertConversation(database.db, user.id)).id);
    const t0 = performance.now();
    // The backlog, 100 days old: created_at spread over a day so the batches walk the index.
    await database.pool.query(
      `INSERT INTO log_events (tenant_id, conversation_id, stream, data, created_at)
       SELECT $1, ($2::uuid[])[1 + (g % $3)], 'stdout', convert_to(repeat(md5(g::text), $4 / 32), 'UTF8'),
              now() - interval '100 days' + (g * interval '86400 seconds' / $5)
         FROM generate_series(1, $5) AS g`,
      [user.id, old, CONVERSATIONS, ROW_BYTES, rows],
    );
    await database.pool.query('VACUUM ANALYZE log_events');
    console.error(`backlog: ${rows} rows in ${Math.round(performance.now() - t0)} ms`);

    // The live turn: its own conversation, the real single log writer.
    const live = await insertConversation(database.db, user.id);
    const writer: LogWriter = deps.logWriters.create({
      lease: { tenantId: user.id, conversationId: live.id, epoch: live.epoch },
      registry: createSecretRegistry(),
    });
    const chunk = Buffer.from(`${'build output line ok\n'.repeat(Math.ceil(TURN_CHUNK / 21))}`).subarray(
      0,
      TURN_CHUNK,
    );
    /** Writes a chunk every TURN_INTERVAL_MS until `until` resolves; each write's commit latency. */
    const turn = async (until: Promise<unknown>): Promise<number[]> => {
      let done = false;
      void until.finally(() => {
        done = true;
      });
      const latencies: number[] = [];
      while (!done) {
        const started = performance.now();
        writer.output('stdout', chunk);
        await writer.flush();
        latencies.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, TURN_INTERVAL_MS));
      }
      return latencies;
    };

    const baseline = await turn(new Promise((r) => setTimeout(r, BASELINE_SECONDS * 1000)));

    const line = PRUNABLE.find((p) => p.table === 'log_events');
    if (!line) throw new Error('no log_events line in PRUNABLE');
    const batches: number[] = [];
    let longest = 0;
    const pruneStarted = performance.now();
    const pruning = prune(database.db, line, new Date(), {
      batchSize,
      onBatch: (n, ms) => {
        batches.push(n);
        longest = Math.max(longest, ms);
      },
    });
    const [deleted, during] = await Promise.all([pruning, turn(pruning)]);
    const pruneSeconds = (performance.now() - pruneStarted) / 1000;
    await writer.close();
    if (deleted !== rows) throw new Error(`the prune deleted ${deleted} rows, not ${rows}`);
    const left = await database.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM log_events WHERE conversation_id <> $1',
      [live.id],
    );
    if (left.rows[0]?.n !== 0) throw new Error(`${left.rows[0]?.n} expired rows left`);

    const p99Base = percentile(baseline, 99);
    const p99During = percentile(during, 99);
    const figures: Figure[] = [
      { name: 'prune time', unit: 's', median: pruneSeconds, samples: [pruneSeconds] },
      {
        name: 'prune rate',
        unit: 'rows/s',
        median: deleted / pruneSeconds,
        samples: [deleted / pruneSeconds],
      },
      {
        name: 'longest transaction',
        unit: 'ms',
        median: longest,
        samples: [longest],
        goal: `< 1000 (batches of ${batchSize}: ${batches.length})`,
      },
      { name: 'turn write p99, no prune', unit: 'ms', median: p99Base, samples: [p99Base] },
      {
        name: 'turn write p99, during prune',
        unit: 'ms',
        median: p99During,
        samples: [p99During],
        baseline: 'turn write p99, no prune',
        ratio: p99During / p99Base,
      },
      {
        name: 'turn write p50, during prune',
        unit: 'ms',
        median: percentile(during, 50),
        samples: [percentile(during, 50)],
      },
      {
        name: 'turn write max, during prune',
        unit: 'ms',
        median: Math.max(...during),
        samples: [Math.max(...during)],
      },
    ];
    writeReport(
      {
        bench: 'retention',
        rows,
        conversations: CONVERSATIONS,
        rowBytes: ROW_BYTES,
        turnWrites: { baseline: baseline.length, during: during.length },
      },
      figures,
      { json: values.json },
    );
  } finally {
    await close();
  }
} finally {
  await scratch.remove();
}
