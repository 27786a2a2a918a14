// The fault "PostgreSQL down during a turn" (issue 39, finding 7), shared by its test
// (conversations.database-outage.test.ts) and its benchmark (scripts/bench-database-outage.ts).
// A dedicated embedded PostgreSQL, never the shared test database, is stopped (fast shutdown)
// while a turn prints a numbered line every 10 ms, and started again on the same port after
// `outageMs`. The server runs as its own process (fixtures/serve-scripted.ts: the real boot) at
// LOG_LEVEL=info, so every line it writes while the database is away is counted, as is the CPU
// time it uses meanwhile (/proc/<pid>/stat).
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestSandboxd } from '../../../sandboxd/test/harness.ts';
import { openDatabase } from '../../src/db/database.ts';
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { migrateJobs } from '../../src/jobs/worker.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createVerifiedUser } from './factories.ts';
import { scriptedServerProcess } from './scripted-server.ts';

export interface OutageResult {
  outageSeconds: number;
  /** Lines the server logged from the stop of PostgreSQL to its restart (the probes' access lines aside). */
  logLines: number;
  /** Up to the first 40 of them, for a failure message. */
  sampleLines: string[];
  /** User + system CPU time of the server process over the same span. */
  cpuSeconds: number;
  /** Statuses of GET /health/ready and GET /health, probed once a second during the outage. */
  readyStatuses: number[];
  healthStatuses: number[];
  /** The turn's status once it ended after recovery. */
  turnStatus: string;
  conversationStatus: string;
  /** The stored stdout, and what the program printed. */
  stored: string;
  expected: string;
  /** The `raw` turn events' lines, one per printed line when none is lost or doubled. */
  eventLines: string[];
}

const POSTGRES_FLAGS = ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'];
const TICKS_PER_SECOND = 100; // USER_HZ

function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** Fastify's access lines of the outage's own health probes: as many as probes, not per second down. */
function isProbeAccessLine(line: string): boolean {
  try {
    const entry = JSON.parse(line) as { reqId?: unknown; msg?: unknown };
    return (
      entry.reqId !== undefined && (entry.msg === 'incoming request' || entry.msg === 'request completed')
    );
  } catch {
    return false;
  }
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function runDatabaseOutage(options: { outageMs: number; lines: number }): Promise<OutageResult> {
  // Below the run's TMPDIR; the `postgres` user (when we are root) must traverse to its cluster.
  const dataDir = mkdtempSync(join(tmpdir(), 'outage-pg-'));
  chmodSync(dataDir, 0o711);
  const port = await freePort();
  const sandboxd = await startTestSandboxd();
  let pg: EmbeddedDatabase | null = null;
  let handle: ReturnType<typeof openDatabase> | null = null;
  let logText = '';
  const server = scriptedServerProcess(() => env, 60_000, { onLog: (chunk) => (logText += chunk) });
  let env: NodeJS.ProcessEnv = {};
  try {
    pg = await startEmbeddedPostgres({ dataDir, port, postgresFlags: POSTGRES_FLAGS });
    handle = openDatabase({ connectionString: pg.url, max: 2, connectionTimeoutMillis: 1000 });
    await migrate(handle.db, handle.pool);
    await migrateJobs(handle.pool, createLogger({ level: 'warn' }));
    const user = await createVerifiedUser(handle.db);
    env = {
      PATH: process.env['PATH'],
      TMPDIR: process.env['TMPDIR'],
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      DATABASE_URL: pg.url,
      DATABASE_SSL: 'false',
      MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
      EMAIL_DELIVERY: 'none',
      SANDBOX_BASE_URL: sandboxd.url,
      SANDBOX_TOKEN: sandboxd.token,
      RATE_LIMIT_MAX: '100000',
    };
    const url = await server.start();
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(url + path, {
        method,
        headers: { ...user.auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const db = handle.db;
    const stdoutOf = async (id: string) =>
      (
        await db
          .selectFrom('log_events')
          .select('data')
          .where('conversation_id', '=', id)
          .where('stream', '=', 'stdout')
          .orderBy('id')
          .execute()
      )
        .map((r) => r.data?.toString('utf8') ?? '')
        .join('');

    const agent = await api('POST', '/api/agents', {
      name: 'numbered',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    if (agent.status !== 201) throw new Error(`creating the agent answered ${agent.status}`);
    const script = `i=1; while [ $i -le ${options.lines} ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done`;
    const started = await api('POST', '/api/conversations', { agent_id: agent.body['id'], prompt: script });
    if (started.status !== 201) throw new Error(`starting the conversation answered ${started.status}`);
    const id = started.body['id'] as string;
    await until(
      'output to be persisted',
      async () => ((await stdoutOf(id)).includes('line 50\n') ? true : undefined),
      60_000,
    );

    // The outage: PostgreSQL's fast shutdown (what `pg_ctl stop -m fast` does), then the same
    // cluster on the same port again.
    const pid = server.pid();
    if (pid === null) throw new Error('the server is not running');
    await pg.stop();
    const logAtStop = logText.length;
    const cpuAtStop = cpuTicks(pid);
    const stoppedAt = performance.now();
    const readyStatuses: number[] = [];
    const healthStatuses: number[] = [];
    while (performance.now() - stoppedAt < options.outageMs) {
      await new Promise((r) =>
        setTimeout(r, Math.min(1000, options.outageMs - (performance.now() - stoppedAt))),
      );
      if (options.outageMs - (performance.now() - stoppedAt) < 200) break;
      readyStatuses.push((await fetch(`${url}/health/ready`)).status);
      healthStatuses.push((await fetch(`${url}/health`)).status);
    }
    const outageSeconds = (performance.now() - stoppedAt) / 1000;
    const cpuSeconds = (cpuTicks(pid) - cpuAtStop) / TICKS_PER_SECOND;
    const during = logText
      .slice(logAtStop)
      .split('\n')
      .filter((line) => line.trim() !== '' && !isProbeAccessLine(line));
    pg = await startEmbeddedPostgres({ dataDir, port, postgresFlags: POSTGRES_FLAGS });

    const turn = await until(
      'the turn to end after the database came back',
      async () => {
        const res = await api('GET', `/api/conversations/${id}/turns`);
        const turns = res.body['data'] as { status: string }[] | undefined;
        return turns?.[0] && !['queued', 'running'].includes(turns[0].status) ? turns[0] : undefined;
      },
      120_000,
    );
    const conversation = await until(
      'the conversation to be idle',
      async () => {
        const res = await api('GET', `/api/conversations/${id}`);
        return res.body['status'] === 'idle' ? res.body : undefined;
      },
      30_000,
    );
    const events = await db
      .selectFrom('log_events')
      .select('data')
      .where('conversation_id', '=', id)
      .where('stream', '=', 'events')
      .orderBy('id')
      .execute();
    return {
      outageSeconds,
      logLines: during.length,
      sampleLines: during.slice(0, 40),
      cpuSeconds,
      readyStatuses,
      healthStatuses,
      turnStatus: turn.status,
      conversationStatus: String(conversation['status']),
      stored: await stdoutOf(id),
      expected: Array.from({ length: options.lines }, (_, i) => `line ${i + 1}\n`).join(''),
      eventLines: events
        .map((r) => JSON.parse(r.data?.toString('utf8') ?? '{}') as { kind: string; line?: string })
        .filter((e) => e.kind === 'raw')
        .map((e) => e.line ?? ''),
    };
  } finally {
    await server.stop('SIGTERM').catch(() => {});
    await handle?.close().catch(() => {});
    await sandboxd.stop().catch(() => {});
    await pg?.destroy().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
}
