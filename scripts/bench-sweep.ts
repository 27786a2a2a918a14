// `npm run bench -- sweep`: what the lifecycle sweep and the orphan probe cost the database with
// more than one replica (issue 39, deliverable 3). 2, then 3 replicas (the real `serve` boot with
// the scripted runtime, each its own process, a lifecycle tick of 5 s instead of the production
// 60 s so that a minute holds twelve ticks) on one PostgreSQL and one sandboxd, with 100 live
// conversations: idle, each with a `ready` sandbox row. The rows are written straight into the
// tables instead of provisioning 100 real sandboxes (too slow on a small machine): an idle
// conversation's owner holds its lock and checks its bounds from the rows alone, the sandbox is
// contacted only when a turn starts, so the lock and NOTIFY traffic is the same.
//
// The counts come from PostgreSQL itself: pg_stat_statements (track = all, so statements run
// inside functions count too), reset at the start of each window. Per replica count:
//   adoption   the replicas start on 100 orphans, until every one is owned
//   steady     a window of --seconds (60) with every conversation owned
//   takeover   kill -9 of the replica owning the most, until every one is owned again
// Figures: pg_try_advisory_lock calls (conversation locks, and all), pg_notify/NOTIFY calls, and
// the orphan probe's statement, each per minute for `steady`, in total for the other two.
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { startTestSandboxd } from '../apps/sandboxd/test/harness.ts';
import { LOCK_NAMESPACE } from '../apps/server/src/conversations/engine/owner.ts';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { freePort } from '../apps/server/src/db/embedded.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';
import { insertConversation } from '../apps/server/test/helpers/conversation-rows.ts';
import { createVerifiedUser } from '../apps/server/test/helpers/factories.ts';
import { startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { type ServerProcess, scriptedServerProcess } from '../apps/server/test/helpers/scripted-server.ts';
import { type Figure, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    conversations: { type: 'string', default: '100' },
    'tick-ms': { type: 'string', default: '5000' },
    replicas: { type: 'string', default: '2,3' },
    json: { type: 'string' },
  },
});
const seconds = Number(values.seconds);
const count = Number(values.conversations);
const tickMs = Number(values['tick-ms']);
const replicaCounts = String(values.replicas).split(',').map(Number);
if (!(seconds > 0)) throw new Error('--seconds must be a positive number');
if (!Number.isInteger(count) || count < 1) throw new Error('--conversations must be a positive integer');
if (!Number.isInteger(tickMs) || tickMs < 100) throw new Error('--tick-ms must be an integer ≥ 100');
if (replicaCounts.some((n) => !Number.isInteger(n) || n < 1)) throw new Error('--replicas: e.g. 2,3');

const scratch = await startScratchPostgres({
  postgresFlags: [
    '-c',
    'shared_preload_libraries=pg_stat_statements',
    '-c',
    'pg_stat_statements.track=all',
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'max_connections=300',
  ],
});
const database = openDatabase({ connectionString: scratch.pg.url, max: 4 });
await migrate(database.db, database.pool);
await migrateJobs(database.pool, createLogger({ level: 'warn' }));
await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`.execute(database.db);
const sandboxd = await startTestSandboxd();

const user = await createVerifiedUser(database.db);
const ids: string[] = [];
for (let i = 0; i < count; i++) {
  const c = await insertConversation(database.db, user.id, { status: 'idle' });
  await database.db
    .insertInto('sandboxes')
    .values({
      id: uuidv7(),
      tenant_id: user.id,
      conversation_id: c.id,
      name: `bench-sweep-${i}`,
      status: 'ready',
      ready_at: new Date(),
    })
    .execute();
  ids.push(c.id);
}

const common = {
  PATH: process.env['PATH'],
  TMPDIR: process.env['TMPDIR'],
  NODE_ENV: 'test',
  LOG_LEVEL: 'warn',
  HOST: '127.0.0.1',
  DATABASE_URL: scratch.pg.url,
  DATABASE_SSL: 'false',
  MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
  EMAIL_DELIVERY: 'none',
  SANDBOX_BASE_URL: sandboxd.url,
  SANDBOX_TOKEN: sandboxd.token,
  RATE_LIMIT_MAX: '100000',
};

/** How many of the conversations a process holds the lock of now. */
async function owned(): Promise<number> {
  const res = await sql<{ n: number }>`SELECT count(*)::int AS n FROM conversations c
    WHERE c.id IN (${sql.join(ids)})
      AND hashtextextended(${LOCK_NAMESPACE} || c.id::text, 0) IN (
        SELECT (classid::int8 << 32) | objid::int8 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 1)`.execute(database.db);
  return res.rows[0]?.n ?? 0;
}

async function ownersByNode(): Promise<Map<string, number>> {
  const rows = await database.db
    .selectFrom('conversations')
    .select(['owner_node', sql<number>`count(*)::int`.as('n')])
    .where('id', 'in', ids)
    .groupBy('owner_node')
    .execute();
  return new Map(rows.map((r) => [r.owner_node ?? '', r.n]));
}

/** Seconds until every conversation is owned, by a node other than `gone` when given. */
async function untilAllOwned(what: string, gone?: string, timeoutMs = 120_000): Promise<number> {
  const t0 = performance.now();
  while ((await owned()) < count || (gone !== undefined && (await ownersByNode()).has(gone))) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out: ${what} (${await owned()} owned)`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return (performance.now() - t0) / 1000;
}

async function resetStatements(): Promise<void> {
  await sql`SELECT pg_stat_statements_reset()`.execute(database.db);
}

interface Counts {
  conversationLocks: number;
  allTryLocks: number;
  notifies: number;
  probes: number;
  detail: { query: string; calls: number }[];
}

/** The replicas' statements since the last reset (this script's own reads excluded). */
async function counts(): Promise<Counts> {
  const res = await sql<{ query: string; calls: string }>`SELECT query, calls FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND query NOT ILIKE '%pg_stat_statements%'
      AND (query ILIKE '%pg_try_advisory%' OR query ILIKE '%pg_notify%' OR query ILIKE 'NOTIFY%'
           OR query ILIKE 'LISTEN%' OR (query ILIKE '%pg_locks%' AND query ILIKE '%last_activity_at%'))`.execute(
    database.db,
  );
  const rows = res.rows.map((r) => ({ query: r.query.replace(/\s+/g, ' '), calls: Number(r.calls) }));
  const sum = (pick: (q: string) => boolean) =>
    rows.filter((r) => pick(r.query.toLowerCase())).reduce((a, r) => a + r.calls, 0);
  return {
    conversationLocks: sum((q) => q.includes('pg_try_advisory_lock') && q.includes('owner_epoch')),
    allTryLocks: sum((q) => q.includes('pg_try_advisory')),
    notifies: sum((q) => q.includes('pg_notify') || q.startsWith('notify')),
    probes: sum((q) => q.includes('pg_locks') && q.includes('last_activity_at')),
    detail: rows.sort((a, b) => b.calls - a.calls),
  };
}

const figures: Figure[] = [];
const figure = (name: string, unit: string, value: number, goal?: string) =>
  figures.push({ name, unit, median: value, samples: [value], ...(goal ? { goal } : {}) });

for (const n of replicaCounts) {
  const replicas: ServerProcess[] = [];
  for (let i = 0; i < n; i++) {
    const env = { ...common, PORT: String(await freePort()) };
    replicas.push(scriptedServerProcess(() => env, 60_000, { tickMs }));
  }
  try {
    // Adoption: every conversation is an orphan when the replicas start together.
    await resetStatements();
    await Promise.all(replicas.map((r) => r.start()));
    const adoptS = await untilAllOwned('adoption');
    const adoption = await counts();
    console.error(
      `${n} replicas: all ${count} owned ${adoptS.toFixed(1)} s after the start; owners ${JSON.stringify([...(await ownersByNode()).values()])}`,
    );
    figure(
      `${n} replicas, adoption: conversation lock attempts`,
      'calls',
      adoption.conversationLocks,
      `≈ ${count}`,
    );
    figure(`${n} replicas, adoption: pg_try_advisory_lock (all)`, 'calls', adoption.allTryLocks);
    figure(`${n} replicas, adoption: NOTIFYs`, 'calls', adoption.notifies);

    // Steady: everything owned, a window of `seconds`.
    await resetStatements();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const steady = await counts();
    const perMinute = (v: number) => (v * 60) / seconds;
    const stillOwned = await owned();
    console.error(`${n} replicas, steady ${seconds} s (${stillOwned}/${count} owned at its end):`);
    for (const d of steady.detail)
      console.error(`  ${String(d.calls).padStart(6)}  ${d.query.slice(0, 120)}`);
    if (stillOwned !== count) throw new Error(`only ${stillOwned} of ${count} owned after the steady window`);
    figure(
      `${n} replicas, steady: conversation lock attempts`,
      '/min',
      perMinute(steady.conversationLocks),
      '0',
    );
    figure(`${n} replicas, steady: pg_try_advisory_lock (all)`, '/min', perMinute(steady.allTryLocks));
    figure(`${n} replicas, steady: NOTIFYs`, '/min', perMinute(steady.notifies), '0');
    figure(`${n} replicas, steady: orphan probes`, '/min', perMinute(steady.probes), `${n * 30} + ticks`);

    // Takeover: the replica owning the most dies; the others adopt its conversations.
    const owners = await ownersByNode();
    const [topNode] = [...owners.entries()].sort((a, b) => b[1] - a[1])[0] ?? [''];
    const victim = replicas.find((r) => topNode.endsWith(`:${r.pid()}`));
    if (!victim) throw new Error(`no replica owns the most (${topNode})`);
    const orphaned = owners.get(topNode) ?? 0;
    await resetStatements();
    await victim.stop('SIGKILL');
    const takeS = await untilAllOwned('takeover', topNode);
    const takeover = await counts();
    console.error(
      `${n} replicas: ${orphaned} orphaned by kill -9, all owned again after ${takeS.toFixed(1)} s; owners ${JSON.stringify([...(await ownersByNode()).values()])}`,
    );
    figure(
      `${n} replicas, takeover of ${orphaned}: conversation lock attempts`,
      'calls',
      takeover.conversationLocks,
      `≈ ${orphaned} × ${n - 1}`,
    );
    figure(`${n} replicas, takeover of ${orphaned}: NOTIFYs`, 'calls', takeover.notifies);
    figure(`${n} replicas, takeover of ${orphaned}: time to all owned`, 's', takeS, '≤ 5 s');
  } finally {
    await Promise.all(replicas.map((r) => r.stop('SIGTERM')));
  }
}

await sandboxd.stop();
await database.close();
await scratch.remove();

writeReport({ bench: 'sweep', conversations: count, seconds, tickMs }, figures, { json: values.json });
