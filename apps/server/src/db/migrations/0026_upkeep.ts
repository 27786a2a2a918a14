import { type Kysely, sql } from 'kysely';

// The upkeep jobs (docs/upkeep.md):
// - untracked_sandboxes: what the sandbox reaper's last full backend listing found that no row
//   knows. Names only; replaced by each full listing; shown on the admin page. The reaper reports
//   these and never destroys them (they may belong to something this database does not know).
// - Indexes for the retention pruner's bounded batches over revoked and expired API keys, so a
//   batch reads only the rows it deletes.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE untracked_sandboxes (
      name text PRIMARY KEY,
      first_seen_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX api_keys_revoked_idx ON api_keys (revoked_at) WHERE revoked_at IS NOT NULL`.execute(
    db,
  );
  await sql`CREATE INDEX api_keys_expires_idx ON api_keys (expires_at) WHERE expires_at IS NOT NULL`.execute(
    db,
  );
}
