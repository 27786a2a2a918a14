// The restore drill (scripts/restore-drill.sh runs this): proves that a backup restores. It
// restores a dump (backup.sh's `pg_dump -Fc` output) into a fresh database, starts the real
// server against it with the master key kept apart from the dump, and checks through the public
// API that an old conversation is listed with its log, and with `task verify-secrets` that every
// stored secret decrypts with that key. Exit 0 when every check passed, 1 otherwise; the summary
// is the last lines of stdout. docs/operations.md, "Restore (the drill)".
//
//   MASTER_SECRETS_KEY=... DRILL_API_KEY=pdk_... scripts/restore-drill.sh paddock-20260101T000000Z.dump
//
// Environment:
//   MASTER_SECRETS_KEY     required: the master key of the backed-up instance
//   SECRET_KEY_BASE        passed to the server as it is (the instance's session signing secret)
//   DRILL_API_KEY          required: an API key of an account in the backup (a "drill" account)
//   DRILL_CONVERSATION_ID  optional: the conversation to check (default: the first listed that has a log)
//   DATABASE_URL           optional: an EMPTY database to restore into; by default a throw-away
//                          embedded PostgreSQL 17 is started and removed afterwards
//   DATABASE_SSL           with DATABASE_URL: passed to the server (default false here)
//   PG_RESTORE             the pg_restore to use (default: pg_restore on PATH; major version 17+)
//
// The server it starts listens on 127.0.0.1 only, sends no mail and points at no sandbox
// backend (a discard address), so the drill never touches production sandboxes. Nothing secret
// is printed: the API key, the master key and database passwords stay out of the output.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from '../apps/server/src/db/embedded.ts';

const ROOT = resolve(import.meta.dirname, '..');
const MAIN = join(ROOT, 'apps/server/src/main.ts');

interface Check {
  name: string;
  ok: boolean;
  detail: string;
}
const checks: Check[] = [];
function record(name: string, ok: boolean, detail: string): boolean {
  checks.push({ name, ok, detail });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}: ${detail}`);
  return ok;
}

function blank(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v.trim() === '' ? undefined : v;
}

class UsageError extends Error {}

interface Run {
  code: number | null;
  out: string;
}
/** Runs a program to its end (killed after timeoutMs) with exactly `env`; stdout and stderr together. */
function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run> {
  return new Promise((resolveRun) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const timer = setTimeout(() => {
      out += `\n(killed after ${timeoutMs / 1000} s)`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      resolveRun({ code: 127, out: `${out}${err.message}` });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolveRun({ code, out });
    });
  });
}

const lastLines = (text: string, n = 5) =>
  text
    .trim()
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-n)
    .join(' | ');

/** A libpq URL without its password, and the password (for PGPASSWORD): off the command line. */
function splitPassword(url: string): { url: string; password: string | undefined } {
  const u = new URL(url);
  const password = u.password ? decodeURIComponent(u.password) : undefined;
  u.password = '';
  return { url: u.toString(), password };
}

/** The URL as it may be printed: no user info, no parameters. */
function printable(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}

async function waitForReady(base: string, server: ChildProcess, timeoutMs: number): Promise<string | null> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (server.exitCode !== null || server.signalCode !== null)
      return `the server exited (${server.exitCode ?? server.signalCode})`;
    try {
      const res = await fetch(`${base}/health/ready`, { signal: AbortSignal.timeout(3000) });
      if (res.status === 200) return null;
      last = `/health/ready answered ${res.status}`;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return `not ready within ${timeoutMs / 1000} s (${last})`;
}

// biome-ignore lint/suspicious/noExplicitAny: parsed API JSON, read field by field
type Json = any;

async function main(argv: string[]): Promise<number> {
  const dump = argv[0];
  if (!dump || argv.length > 1 || dump.startsWith('-'))
    throw new UsageError('usage: scripts/restore-drill.sh DUMP_FILE');
  if (!existsSync(dump) || !statSync(dump).isFile()) throw new UsageError(`${dump}: no such file`);
  const masterKey = blank('MASTER_SECRETS_KEY');
  if (!masterKey)
    throw new UsageError('MASTER_SECRETS_KEY: required (the master key of the backed-up instance)');
  const apiKey = blank('DRILL_API_KEY');
  if (!apiKey) throw new UsageError('DRILL_API_KEY: required (an API key of an account in the backup)');
  const wantedConversation = blank('DRILL_CONVERSATION_ID');
  const targetUrl = blank('DATABASE_URL');
  if (targetUrl && !/^postgres(ql)?:\/\//.test(targetUrl))
    throw new UsageError('DATABASE_URL: must be a postgres:// or postgresql:// URL');
  const pgRestore = blank('PG_RESTORE') ?? 'pg_restore';
  const baseEnv = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/' };

  const work = mkdtempSync(join(tmpdir(), 'paddock-drill-'));
  let embedded: EmbeddedDatabase | null = null;
  let server: ChildProcess | null = null;
  try {
    // 1. The dump is a pg_dump archive this pg_restore reads.
    const version = await run(pgRestore, ['--version'], baseEnv, 30_000);
    const major = Number(/(\d+)(\.\d+)?/.exec(version.out)?.[1] ?? 0);
    if (version.code !== 0 || major < 17)
      throw new UsageError(
        `${pgRestore}: PostgreSQL 17 or later needed (PG_RESTORE or PATH), got: ${lastLines(version.out, 1) || 'nothing'}`,
      );
    const list = await run(pgRestore, ['--list', dump], baseEnv, 60_000);
    const entries = list.out.split('\n').filter((l) => /^\d+;/.test(l)).length;
    if (
      !record(
        'dump readable',
        list.code === 0,
        list.code === 0 ? `${entries} archive entries (${lastLines(version.out, 1)})` : lastLines(list.out),
      )
    )
      return 1;

    // 2. A fresh database.
    let url: string;
    let ssl = 'false';
    if (targetUrl) {
      url = targetUrl;
      ssl = blank('DATABASE_SSL') ?? 'false';
      const client = new pg.Client({
        connectionString: url,
        ...(ssl === 'false' ? {} : { ssl: { rejectUnauthorized: false } }),
      });
      try {
        await client.connect();
        const { rows } = await client.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
              AND n.nspname NOT LIKE 'pg_toast%'`,
        );
        if (Number(rows[0]?.n ?? 0) > 0) {
          record(
            'fresh database',
            false,
            `${printable(url)} has tables: the drill restores into an empty database only`,
          );
          return 1;
        }
      } catch (err) {
        record('fresh database', false, `${printable(url)}: ${(err as Error).message}`);
        return 1;
      } finally {
        await client.end().catch(() => {});
      }
      record('fresh database', true, `${printable(url)} (given, empty)`);
    } else {
      embedded = await startEmbeddedPostgres({ dataDir: join(work, 'db'), database: 'paddock_drill' });
      url = embedded.url;
      record('fresh database', true, `throw-away embedded PostgreSQL on port ${embedded.port}`);
    }

    // 3. pg_restore, stopping at the first error.
    const target = splitPassword(url);
    const restored = await run(
      pgRestore,
      ['--no-owner', '--no-acl', '--exit-on-error', '--single-transaction', '--dbname', target.url, dump],
      {
        ...baseEnv,
        ...(target.password ? { PGPASSWORD: target.password } : {}),
        ...(ssl === 'false' ? {} : { PGSSLMODE: 'require' }),
      },
      30 * 60_000,
    );
    if (
      !record(
        'restored',
        restored.code === 0,
        restored.code === 0 ? 'pg_restore finished without error' : lastLines(restored.out),
      )
    )
      return 1;

    // 4. The real server on it: migrations run at boot (a dump from an older release is upgraded).
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const serverEnv: NodeJS.ProcessEnv = {
      ...baseEnv,
      NODE_ENV: 'development',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: url,
      DATABASE_SSL: ssl,
      MASTER_SECRETS_KEY: masterKey,
      ...(blank('SECRET_KEY_BASE') ? { SECRET_KEY_BASE: blank('SECRET_KEY_BASE') } : {}),
      EMAIL_DELIVERY: 'none',
      SANDBOX_BASE_URL: 'http://127.0.0.1:9',
      PADDOCK_DATA_DIR: join(work, 'data'),
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
    };
    const logPath = join(work, 'server.log');
    const logFd = openSync(logPath, 'a');
    server = spawn(process.execPath, [MAIN, 'serve'], { env: serverEnv, stdio: ['ignore', logFd, logFd] });
    closeSync(logFd);
    const notReady = await waitForReady(base, server, 180_000);
    if (!record('server boots', notReady === null, notReady ?? `migrated and ready on ${base}`)) {
      console.log(lastLines(readFileSync(logPath, 'utf8'), 10));
      return 1;
    }

    // 5. An old conversation is listed, with its log.
    const api = async (
      method: string,
      path: string,
      body?: unknown,
    ): Promise<{ status: number; body: Json }> => {
      const res = await fetch(base + path, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      let parsed: Json = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        // not JSON: kept as text
      }
      return { status: res.status, body: parsed };
    };
    const listed = await api('GET', '/api/conversations?limit=100');
    const conversations: Json[] =
      listed.status === 200 && Array.isArray(listed.body?.data) ? listed.body.data : [];
    if (listed.status !== 200) {
      record(
        'conversations listed',
        false,
        `GET /api/conversations answered ${listed.status}: ${JSON.stringify(listed.body?.message ?? listed.body)}`,
      );
    } else if (wantedConversation && !conversations.some((c) => c.id === wantedConversation)) {
      record(
        'conversations listed',
        false,
        `${conversations.length} listed, ${wantedConversation} not among them`,
      );
    } else {
      record(
        'conversations listed',
        conversations.length > 0,
        `${conversations.length} conversation(s) of the drill account`,
      );
    }
    const candidates = wantedConversation
      ? [wantedConversation]
      : conversations.slice(0, 20).map((c) => String(c.id));
    let logged: { id: string; events: number; bytes: number } | null = null;
    let logProblem = candidates.length === 0 ? 'no conversation to read' : '';
    for (const id of candidates) {
      const events = await api('GET', `/api/conversations/${encodeURIComponent(id)}/events?limit=1000`);
      if (events.status !== 200) {
        logProblem = `GET /api/conversations/${id}/events answered ${events.status}`;
        continue;
      }
      const rows: Json[] = Array.isArray(events.body?.data) ? events.body.data : [];
      const output = rows.filter((r) => r.stream === 'stdout' && typeof r.text === 'string');
      if (output.length > 0) {
        logged = {
          id,
          events: rows.length,
          bytes: output.reduce((n, r) => n + Buffer.byteLength(r.text), 0),
        };
        break;
      }
      logProblem = `conversation ${id} has no stored output`;
    }
    record(
      'conversation log served',
      logged !== null,
      logged
        ? `conversation ${logged.id}: ${logged.events} log event(s), ${logged.bytes} byte(s) of output`
        : logProblem,
    );

    // 6. Every stored secret decrypts with this master key (read only).
    const verify = await run(
      process.execPath,
      [MAIN, 'task', 'verify-secrets'],
      { ...serverEnv, LOG_LEVEL: 'error' },
      10 * 60_000,
    );
    const verified = verify.out.split('\n').find((l) => l.startsWith('verified ')) ?? lastLines(verify.out);
    const keyProblem = verify.code === 0 ? '' : ` (${lastLines(verify.out.replace(verified, ''), 1)})`;
    record('secrets decrypt', verify.code === 0, `${verified}${keyProblem}`);

    // 7. The server seals with the account's tenant key: a new secret on a throw-away environment.
    const env = await api('POST', '/api/environments', { name: `restore-drill-${Date.now()}` });
    if (env.status !== 201) {
      record('server uses the key', false, `POST /api/environments answered ${env.status}`);
    } else {
      const sealed = await api('POST', `/api/environments/${env.body.id}/secrets`, {
        key: 'RESTORE_DRILL',
        value: `drill-${Date.now()}`,
      });
      record(
        'server uses the key',
        sealed.status === 201,
        sealed.status === 201
          ? 'a new secret of the drill account sealed with its restored tenant key'
          : `POST …/secrets answered ${sealed.status}: ${sealed.body?.message ?? ''}`,
      );
    }
    return checks.every((c) => c.ok) ? 0 : 1;
  } finally {
    if (server && server.exitCode === null && server.signalCode === null) {
      const exited = new Promise<void>((r) => server?.once('exit', () => r()));
      server.kill('SIGTERM');
      const timer = setTimeout(() => server?.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    if (embedded) await embedded.destroy().catch(() => {});
    rmSync(work, { recursive: true, force: true });
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    const failed = checks.filter((c) => !c.ok);
    console.log(
      code === 0
        ? `restore drill: PASSED (${checks.length} checks)`
        : `restore drill: FAILED (${failed.length} of ${checks.length} checks failed${failed.length ? `: ${failed.map((c) => c.name).join(', ')}` : ''})`,
    );
    process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      console.error(`restore drill: ${err.message}`);
      process.exit(2);
    }
    console.error(`restore drill: FAILED: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
