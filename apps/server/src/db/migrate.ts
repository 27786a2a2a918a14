// Forward-only migrations, run at boot. Invariants:
// - Serialized across replicas by a session advisory lock held for the whole run, so two
//   replicas booting together never apply the same migration twice (migrate.test.ts).
// - Each migration runs in its own transaction together with its bookkeeping row, so a
//   crash mid-migration leaves it unapplied, never half-applied.
// - Idempotent: a second run applies nothing.
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type Kysely, sql } from 'kysely';
import type pg from 'pg';

// A fixed 64-bit key: "paddock migrations".
export const MIGRATION_LOCK_KEY = 7_261_633_001_845_239n;

export interface Migration {
  name: string;
  // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was, not today's typed one
  up(db: Kysely<any>): Promise<void>;
}

const migrationsDir = join(dirname(fileURLToPath(import.meta.url)), 'migrations');

export async function loadMigrations(dir = migrationsDir): Promise<Migration[]> {
  const files = readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.ts$/.test(f))
    .sort();
  const out: Migration[] = [];
  for (const file of files) {
    const mod = (await import(pathToFileURL(join(dir, file)).href)) as Partial<Migration>;
    if (typeof mod.up !== 'function') throw new Error(`migration ${file} does not export up()`);
    out.push({ name: file.replace(/\.ts$/, ''), up: mod.up });
  }
  return out;
}

export interface MigrateResult {
  applied: string[];
}

export async function migrate(
  // biome-ignore lint/suspicious/noExplicitAny: see Migration.up
  db: Kysely<any>,
  pool: pg.Pool,
  migrations?: Migration[],
): Promise<MigrateResult> {
  const list = migrations ?? (await loadMigrations());
  const applied: string[] = [];
  const lockClient = await pool.connect();
  try {
    await lockClient.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
    await sql`CREATE TABLE IF NOT EXISTS paddock_migrations (
      name text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
    const done = new Set(
      (await sql<{ name: string }>`SELECT name FROM paddock_migrations`.execute(db)).rows.map((r) => r.name),
    );
    for (const m of list) {
      if (done.has(m.name)) continue;
      await db.transaction().execute(async (trx) => {
        await m.up(trx);
        await sql`INSERT INTO paddock_migrations (name) VALUES (${m.name})`.execute(trx);
      });
      applied.push(m.name);
    }
  } finally {
    await lockClient.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY.toString()]).catch(() => {});
    lockClient.release();
  }
  return { applied };
}
