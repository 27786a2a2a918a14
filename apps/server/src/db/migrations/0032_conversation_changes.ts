import { type Kysely, sql } from 'kysely';

// The agent's work out of the sandbox, deliverable 1 (issue 41): Changes.
// - conversation_repositories: the base of every repository the environment cloned into a
//   conversation's sandbox, the commit the clone was made at (`git rev-parse HEAD` after the clone
//   stage). Written once per (conversation, dir): a re-provision of the same conversation keeps
//   the original base. The URL is stored without credentials (origin and path).
// - turn_changes: what one turn changed, recorded after the turn (conversations/work/changes-turns.ts):
//   the trees at the turn's start (`start_trees`, written before the turn runs, so that another
//   owner can finish the record after a take-over) and, once recorded, the files with their
//   stats and bounded, redacted patches (`repositories`), so a turn's changes outlive the sandbox.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE conversation_repositories (
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      conversation_id uuid NOT NULL,
      dir text NOT NULL,
      url text NOT NULL,
      base_commit text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (conversation_id, dir),
      FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`
    CREATE TABLE turn_changes (
      turn_id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      conversation_id uuid NOT NULL,
      status text NOT NULL CHECK (status IN ('recording', 'recorded', 'failed')),
      start_trees jsonb NOT NULL,
      repositories jsonb,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      recorded_at timestamptz,
      FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, id) ON DELETE CASCADE,
      FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE INDEX turn_changes_conversation_idx ON turn_changes (conversation_id)`.execute(db);
  // The retention pruner's column (upkeep/prunable.ts: kept as long as the log, 90 days).
  await sql`CREATE INDEX turn_changes_created_at_idx ON turn_changes (created_at)`.execute(db);
}
