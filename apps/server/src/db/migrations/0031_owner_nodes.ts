import { type Kysely, sql } from 'kysely';

// Owner leases (issue 39, deliverable 2; conversations/engine/owner.ts invariant 7): one row per
// server process that can own conversations, naming the backend of its dedicated ownership
// connection (pid and start time: a pid alone may be reused by a later backend) and until when
// its lease runs. The process renews its row every third of the lease with one statement,
// whatever the number of conversations it owns; a replica that finds a row expired fences that
// process (deletes the row, bumps the epoch of its conversations, ends its ownership backend) and
// adopts. The index on conversations.owner_node serves that bump. UNLOGGED: a lease is not
// durable by design (after a crash every process registers again at connect).
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE UNLOGGED TABLE owner_nodes (
      node text PRIMARY KEY,
      backend_pid integer NOT NULL,
      backend_start timestamptz NOT NULL,
      lease_until timestamptz NOT NULL,
      renewed_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX conversations_owner_node_idx ON conversations (owner_node)`.execute(db);
}
