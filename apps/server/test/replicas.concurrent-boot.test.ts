// Issue 39, deliverable 5: two replicas (the real `serve` boot with the scripted runtime, each its
// own process) started at the same moment on an EMPTY database (the test holds the migration
// lock until both wait for it, then lets go): the migrations run once, by one of them (the other
// gets the lock next and finds nothing to do), both boot and serve,
// and the boot sweep runs once for the cluster: exactly one process logs it (engine.ts,
// invariant 3).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { startTestSandboxd, type TestSandboxd } from '../../sandboxd/test/harness.ts';
import { DEFAULT_TICK_MS } from '../src/conversations/engine/lifecycle.ts';
import { type DatabaseHandle, openDatabase } from '../src/db/database.ts';
import { freePort } from '../src/db/embedded.ts';
import { loadMigrations, MIGRATION_LOCK_KEY } from '../src/db/migrate.ts';
import { withAdmin } from './helpers/database.ts';
import { scriptedServerProcess } from './helpers/scripted-server.ts';

const BOOT_SWEEP = 'boot sweep: adopting the conversations of processes that died';

let sandboxd: TestSandboxd;
let name = '';
let dbUrl = '';
let handle: DatabaseHandle;
const logs: [string, string] = ['', ''];
let envs: NodeJS.ProcessEnv[] = [];
const replicas = [0, 1].map((i) =>
  scriptedServerProcess(() => envs[i] ?? {}, 90_000, {
    tickMs: DEFAULT_TICK_MS,
    onLog: (chunk) => {
      logs[i as 0 | 1] += chunk;
    },
  }),
);

/** The JSON log lines of replica `i` (LOG_LEVEL=info). */
function lines(i: 0 | 1): Record<string, unknown>[] {
  return logs[i]
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

before(async () => {
  sandboxd = await startTestSandboxd();
  // Not the migrated template: a database with nothing in it.
  name = `t_empty_${randomBytes(6).toString('hex')}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE template0`));
  const url = new URL(process.env['PADDOCK_TEST_PG_ADMIN_URL'] ?? '');
  url.pathname = `/${name}`;
  dbUrl = url.toString();
  handle = openDatabase({ connectionString: dbUrl, max: 2 });
  const common = {
    PATH: process.env['PATH'],
    TMPDIR: process.env['TMPDIR'],
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    DATABASE_URL: url.toString(),
    DATABASE_SSL: 'false',
    MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
    EMAIL_DELIVERY: 'none',
    SANDBOX_BASE_URL: sandboxd.url,
    SANDBOX_TOKEN: sandboxd.token,
    RATE_LIMIT_MAX: '100000',
  };
  envs = [
    { ...common, PORT: String(await freePort()) },
    { ...common, PORT: String(await freePort()) },
  ];
});

after(async () => {
  await Promise.all(replicas.map((r) => r.stop('SIGTERM')));
  await sandboxd.stop();
  await handle?.close();
  if (name) await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
});

it('two replicas booting together on an empty database: migrations once, both serve, one boot sweep', async () => {
  const before = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`.execute(handle.db);
  assert.equal(before.rows[0]?.n, 0, 'the database starts empty');

  // The test holds the migration lock while both start, until both wait for it: then they
  // race for it from the same moment, whatever their start-up times.
  const holder = new pg.Client({ connectionString: dbUrl });
  await holder.connect();
  let urls: string[];
  try {
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
    const starting = Promise.all(replicas.map((r) => r.start()));
    starting.catch(() => {}); // awaited below
    const deadline = Date.now() + 60_000;
    for (;;) {
      const waiting = await holder.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND NOT granted
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      if (waiting.rows[0]?.n === 2) break;
      assert.ok(Date.now() < deadline, 'both replicas wait for the migration lock');
      await new Promise((r) => setTimeout(r, 20));
    }
    await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY.toString()]);
    urls = await starting;
  } finally {
    await holder.end();
  }

  // Every migration applied exactly once (the table's primary key would refuse a second row, so
  // the proof is the log: one replica applied them all, the other none).
  const expected = (await loadMigrations()).map((m) => m.name);
  const applied = await sql<{ name: string }>`SELECT name FROM paddock_migrations ORDER BY name`.execute(
    handle.db,
  );
  assert.deepEqual(
    applied.rows.map((r) => r.name),
    expected,
  );
  const appliedBy = ([0, 1] as const).map((i) =>
    lines(i)
      .filter((l) => l['msg'] === 'migrations applied')
      .map((l) => l['applied'] as string[]),
  );
  assert.deepEqual(
    appliedBy.map((a) => a.length).sort(),
    [0, 1],
    `exactly one replica applied migrations: ${JSON.stringify(appliedBy)}`,
  );
  assert.deepEqual(appliedBy.flat(2), expected);
  // graphile-worker's own schema was installed once too, without an error on either side.
  const worker = await sql<{ n: number }>`SELECT count(*)::int AS n FROM graphile_worker.migrations`.execute(
    handle.db,
  );
  assert.ok((worker.rows[0]?.n ?? 0) > 0);
  for (const i of [0, 1] as const) {
    const bad = lines(i).filter((l) => l['level'] === 'error' || l['level'] === 'fatal');
    assert.deepEqual(bad, [], `replica ${i} logged no error`);
  }

  // Both serve the same database: an account registered on one signs in on the other.
  const email = `boot-${randomBytes(4).toString('hex')}@example.com`;
  const password = 'correct horse battery staple';
  const registered = await fetch(`${urls[0]}/api/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  assert.equal(registered.status, 201, await registered.text());
  const login = await fetch(`${urls[1]}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  assert.equal(login.status, 200, await login.text());

  // The boot sweep ran once for the cluster.
  const sweeps = ([0, 1] as const).map((i) => lines(i).filter((l) => l['msg'] === BOOT_SWEEP).length);
  assert.deepEqual([...sweeps].sort(), [0, 1], `boot sweeps per replica: ${JSON.stringify(sweeps)}`);
});
