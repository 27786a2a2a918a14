import { type Kysely, sql } from 'kysely';

// The per-IP rate-limit counters shared by every replica (RATE_LIMIT_STORE=postgres,
// http/plugins/rate-limit-store.ts): one row per client address and limiter, its hits in the
// current window and when that window ends. UNLOGGED: the counters are not durable by design
// (a crash empties them, as a restart empties the in-memory ones) and a hit writes no WAL.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE UNLOGGED TABLE rate_limit_buckets (
      key text PRIMARY KEY,
      hits integer NOT NULL,
      resets_at timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX rate_limit_buckets_resets_at_idx ON rate_limit_buckets (resets_at)`.execute(db);
}
