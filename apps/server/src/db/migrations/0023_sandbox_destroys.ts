import { type Kysely, sql } from 'kysely';

// Backend destroys still owed (conversations/provisioning/destroy-queue.ts): a sandbox whose destroy failed is
// kept here until the backend confirms it. No foreign key: the sandbox must still go when its
// conversation, or its account, is deleted meanwhile. A name only, never a secret.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE sandbox_destroys (
      name text PRIMARY KEY,
      tenant_id uuid NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      last_error text,
      next_at timestamptz NOT NULL DEFAULT now(),
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX sandbox_destroys_next_idx ON sandbox_destroys (next_at)`.execute(db);
}
