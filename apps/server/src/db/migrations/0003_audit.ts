import { type Kysely, sql } from 'kysely';

// Append-only audit log. UPDATE is refused by a trigger; DELETE stays possible for the
// retention pruner (365 days) and the account deletion path.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE audit_events (
      id uuid PRIMARY KEY,
      tenant_id uuid,
      type text NOT NULL,
      actor_kind text NOT NULL CHECK (actor_kind IN ('user', 'api_key', 'system')),
      actor_user_id uuid,
      actor_api_key_id uuid,
      ip text,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX audit_events_tenant_idx ON audit_events (tenant_id, id DESC)`.execute(db);
  await sql`CREATE INDEX audit_events_created_at_idx ON audit_events (created_at)`.execute(db);
  await sql`
    CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'audit_events is append-only';
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()`.execute(db);
}
