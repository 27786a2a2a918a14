import { type Kysely, sql } from 'kysely';

// Conversations, their sandboxes, turns, turn images and the log feed (issue 9).
//
// - Every child row carries the tenant id and references its parent through the composite
//   (tenant_id, id) key, so a cross-tenant reference cannot exist.
// - A conversation outlives its agent and vault: deleting either sets the reference to null
//   (history stays readable; a follow-up prompt then refuses with a clear error).
// - Ownership (src/conversations/engine/owner.ts): `owner_epoch` is bumped by every process that takes
//   a conversation over; each write of an owner checks the epoch it took, so a paused old owner
//   cannot write after a new one took over.
// - Log events are the single feed (SSE, JSON, console): ids are one global identity, so they
//   increase in commit order for a conversation because only its owner appends to it.
// - Reattach de-duplication counts raw (pre-redaction) bytes persisted per stream on the turn.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE conversations (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      agent_id uuid,
      vault_id uuid,
      status text NOT NULL CHECK (status IN ('pending', 'running', 'idle', 'failed', 'terminated')),
      source text NOT NULL CHECK (source IN ('api', 'ui', 'cli', 'sandbox')),
      parent_conversation_id uuid,
      title text NOT NULL,
      failure_reason text,
      unread boolean NOT NULL DEFAULT false,
      runtime_session_id text,
      session_state bytea,
      session_state_at timestamptz,
      log_bytes bigint NOT NULL DEFAULT 0,
      log_truncated boolean NOT NULL DEFAULT false,
      owner_epoch bigint NOT NULL DEFAULT 0,
      owner_node text,
      last_activity_at timestamptz NOT NULL DEFAULT now(),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id),
      FOREIGN KEY (tenant_id, agent_id) REFERENCES agents (tenant_id, id) ON DELETE SET NULL (agent_id),
      FOREIGN KEY (tenant_id, vault_id) REFERENCES vaults (tenant_id, id) ON DELETE SET NULL (vault_id),
      FOREIGN KEY (tenant_id, parent_conversation_id) REFERENCES conversations (tenant_id, id)
        ON DELETE SET NULL (parent_conversation_id)
    )`.execute(db);
  await sql`CREATE INDEX conversations_tenant_idx ON conversations (tenant_id, id DESC)`.execute(db);
  await sql`CREATE INDEX conversations_agent_idx ON conversations (agent_id) WHERE agent_id IS NOT NULL`.execute(
    db,
  );
  await sql`CREATE INDEX conversations_vault_idx ON conversations (vault_id) WHERE vault_id IS NOT NULL`.execute(
    db,
  );
  await sql`CREATE INDEX conversations_parent_idx ON conversations (parent_conversation_id)
    WHERE parent_conversation_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX conversations_live_idx ON conversations (status) WHERE status IN ('pending', 'running')`.execute(
    db,
  );

  // One row per backend sandbox a conversation has had. At most one is live (pending,
  // starting or ready) per conversation; the quota counts live rows per tenant.
  await sql`
    CREATE TABLE sandboxes (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      conversation_id uuid NOT NULL,
      name text NOT NULL UNIQUE,
      status text NOT NULL CHECK (status IN ('pending', 'starting', 'ready', 'terminated', 'failed')),
      reason text,
      checkpoint_id text,
      created_at timestamptz NOT NULL DEFAULT now(),
      ready_at timestamptz,
      ended_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id),
      FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX sandboxes_one_live_idx ON sandboxes (conversation_id)
    WHERE status IN ('pending', 'starting', 'ready')`.execute(db);
  await sql`CREATE INDEX sandboxes_tenant_live_idx ON sandboxes (tenant_id)
    WHERE status IN ('pending', 'starting', 'ready')`.execute(db);

  await sql`
    CREATE TABLE turns (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      conversation_id uuid NOT NULL,
      seq integer NOT NULL,
      prompt text NOT NULL,
      status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'interrupted')),
      sandbox_id uuid,
      exec_session_id text,
      runtime_session_id text,
      exit_code integer,
      error text,
      usage jsonb,
      stdout_raw_bytes bigint NOT NULL DEFAULT 0,
      stderr_raw_bytes bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      ended_at timestamptz,
      UNIQUE (conversation_id, seq),
      UNIQUE (tenant_id, id),
      FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);

  await sql`
    CREATE TABLE turn_images (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      turn_id uuid NOT NULL,
      media_type text NOT NULL,
      data bytea NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE INDEX turn_images_turn_idx ON turn_images (turn_id)`.execute(db);

  // The feed. `data` holds redacted output bytes (stdout/stderr) or is null for stage rows,
  // which carry stage/state/duration_ms/message instead. Stored out of line uncompressed:
  // measured faster for batched inserts (shared/design/performance.md).
  await sql`
    CREATE TABLE log_events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      tenant_id uuid NOT NULL,
      conversation_id uuid NOT NULL,
      turn_id uuid,
      stream text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'stage')),
      data bytea,
      stage text,
      state text CHECK (state IN ('started', 'done', 'failed', 'interrupted')),
      duration_ms integer,
      message text,
      created_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((stream = 'stage') = (stage IS NOT NULL AND state IS NOT NULL)),
      FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`ALTER TABLE log_events ALTER COLUMN data SET STORAGE EXTERNAL`.execute(db);
  await sql`CREATE INDEX log_events_conversation_idx ON log_events (conversation_id, id)`.execute(db);
  await sql`CREATE INDEX log_events_created_idx ON log_events (created_at)`.execute(db);

  // The sandbox callback key belongs to its conversation: deleting the conversation deletes it.
  await sql`
    ALTER TABLE api_keys ADD CONSTRAINT api_keys_conversation_fk
      FOREIGN KEY (conversation_id) REFERENCES conversations (id) ON DELETE CASCADE`.execute(db);
}
