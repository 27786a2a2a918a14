import { type Kysely, sql } from 'kysely';

// Data exports of an account (docs/data-export.md): one row per export, its gzipped JSON payload
// as bytea chunks beside it. Both go with the account (ON DELETE CASCADE) and with the export
// (the retention pruner deletes expired rows; their chunks follow).
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE account_exports (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'building', 'ready', 'failed')),
      size_bytes bigint,
      failure_reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      completed_at timestamptz,
      expires_at timestamptz
    )`.execute(db);
  // One export at a time per account: a second request while one is pending or building is refused.
  await sql`CREATE UNIQUE INDEX account_exports_one_active_idx ON account_exports (tenant_id)
    WHERE status IN ('pending', 'building')`.execute(db);
  await sql`CREATE INDEX account_exports_tenant_idx ON account_exports (tenant_id, created_at DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX account_exports_expires_idx ON account_exports (expires_at)
    WHERE expires_at IS NOT NULL`.execute(db);
  await sql`
    CREATE TABLE account_export_chunks (
      export_id uuid NOT NULL REFERENCES account_exports(id) ON DELETE CASCADE,
      seq integer NOT NULL,
      data bytea NOT NULL,
      PRIMARY KEY (export_id, seq)
    )`.execute(db);
}
