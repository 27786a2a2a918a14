import { readFileSync } from 'node:fs';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Config } from '../config/config.ts';
import type { Database } from './schema.ts';
import { preparedStatementName } from './statement-names.ts';

export type Db = Kysely<Database>;

export interface DatabaseHandle {
  db: Db;
  pool: pg.Pool;
  url: string;
  close(): Promise<void>;
}

// int8 (bigint) columns are returned as strings by default; counts and sizes here fit in a double.
pg.types.setTypeParser(20, (v) => Number(v));

export function poolOptions(config: Config, url: string): pg.PoolConfig {
  const isLoopback = /@(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(url);
  let ssl: pg.PoolConfig['ssl'] = false;
  if (config.database.ssl && !(isLoopback && !config.database.url)) {
    ssl = {
      rejectUnauthorized: config.database.sslVerify,
      ...(config.database.sslCaFile ? { ca: readFileSync(config.database.sslCaFile, 'utf8') } : {}),
    };
  }
  return {
    connectionString: url,
    ssl,
    max: config.database.poolMax,
    // Bounded waits: /health/ready must answer within a few seconds when the database is down.
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  };
}

/**
 * A pg client that sends SQL texts registered by prepared() as named statements, so each
 * connection parses and plans them once. Everything else passes through untouched.
 */
class PreparingClient extends pg.Client {
  // biome-ignore lint/suspicious/noExplicitAny: pg's query() has a dozen overloads; this forwards them all
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config === 'string' && Array.isArray(values)) {
      const name = preparedStatementName(config);
      if (name) return super.query({ name, text: config, values }, callback);
    }
    return super.query(config, values, callback);
  }
}

/** How long close() waits for the pool's connections to have ended. */
const CLOSE_WAIT_MS = 2000;

export function openDatabase(options: pg.PoolConfig & { connectionString: string }): DatabaseHandle {
  const pool = new pg.Pool({ ...options, Client: PreparingClient });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  // pool.end() resolves once it has asked every client to end, not once their connections have
  // closed: close() waits for those too, so a database stopped right after (the embedded one at
  // shutdown) never terminates a session of ours ("terminating connection due to administrator
  // command" warnings on every Ctrl-C).
  const open = new Set<pg.Client>();
  pool.on('connect', (client) => {
    open.add(client);
    client.once('end', () => open.delete(client));
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    url: options.connectionString,
    close: async () => {
      await db.destroy();
      const ended = [...open].map((client) => new Promise<void>((r) => client.once('end', () => r())));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(ended),
        new Promise<void>((r) => {
          timer = setTimeout(r, CLOSE_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}

/** Connects once and reports a clear error when the database is down or refuses us. */
export async function assertReachable(pool: pg.Pool): Promise<void> {
  try {
    const client = await pool.connect();
    try {
      const res = await client.query<{ v: string }>("SELECT current_setting('server_version_num') AS v");
      const version = Number(res.rows[0]?.v ?? 0);
      if (version < 160000) {
        throw new Error(
          `PostgreSQL ${Math.floor(version / 10000)} is too old: Paddock needs PostgreSQL 16 or later`,
        );
      }
    } finally {
      client.release();
    }
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot connect to the database (DATABASE_URL): ${reason}`);
  }
}

/** Network-level codes of a database that is down or unreachable. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'EPIPE']);
/** SQLSTATEs of a server that cannot take the request now: admin/crash shutdown, starting up, too many connections. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * An error that says the database cannot serve right now (down, restarting, pool exhausted),
 * not that the request was wrong: the API answers 503 with Retry-After, never 500.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code)))
    return true;
  return /timeout exceeded when trying to connect|Connection terminated/.test(error.message);
}
