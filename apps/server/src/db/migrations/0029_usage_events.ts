import { type Kysely, sql } from 'kysely';

// Usage events (issue 38 item 7): one row per sandbox lifetime and one per turn that ran, the
// meter behind GET /api/account/usage, the account page and the admin's user page.
//
// - Written by triggers in the transaction of the state change that ends the sandbox or the
//   turn, whichever path ends it (the owner, a terminate request, the provisioner, the reaper):
//   a crash either keeps both or neither, and no caller has to remember to meter.
// - Keyed by (kind, subject_id), the sandbox's or the turn's id, inserted ON CONFLICT DO NOTHING:
//   a retried or repeated end cannot count twice.
// - A sandbox's busy seconds are the time its turns ran within its ready life, parked seconds
//   the rest of that life (ready and idle); a sandbox that failed before ready has neither.
// - Independent of the conversation (no FK: usage outlives a deleted conversation), bound to the
//   account (ON DELETE CASCADE: deleting the account removes its usage). created_at is the end
//   of what the event meters (also for the events this migration writes for what had already
//   ended), so the retention pruner's "created_at older than 400 days" counts from that end.
// - Existing ended sandboxes and turns are metered once, here.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE usage_events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('sandbox', 'turn')),
      subject_id uuid NOT NULL,
      conversation_id uuid NOT NULL,
      sandbox_id uuid,
      status text NOT NULL,
      reason text,
      runtime text,
      model text,
      started_at timestamptz NOT NULL,
      ready_at timestamptz,
      ended_at timestamptz NOT NULL,
      busy_seconds double precision NOT NULL DEFAULT 0,
      parked_seconds double precision NOT NULL DEFAULT 0,
      input_tokens bigint,
      output_tokens bigint,
      cache_read_tokens bigint,
      cost_usd numeric,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (kind, subject_id)
    )`.execute(db);
  await sql`CREATE INDEX usage_events_tenant_ended_idx ON usage_events (tenant_id, ended_at)`.execute(db);
  await sql`CREATE INDEX usage_events_created_at_idx ON usage_events (created_at)`.execute(db);

  // A runtime's figures as stored on the turn, read defensively: they come from the agent CLI's
  // output, which the sandbox controls, and a cast that failed here would fail the update that
  // ends the turn. A count that is not a number from 0 to 10^18, or a cost that is not one from 0
  // to 10^9 USD, is recorded as not reported.
  await sql`
    CREATE FUNCTION usage_count(v jsonb) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE WHEN jsonb_typeof(v) = 'number' AND v::numeric BETWEEN 0 AND 1e18
        THEN round(v::numeric)::bigint END
    $$`.execute(db);
  await sql`
    CREATE FUNCTION usage_cost(v jsonb) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE WHEN jsonb_typeof(v) = 'number' AND v::numeric BETWEEN 0 AND 1e9 THEN v::numeric END
    $$`.execute(db);

  // A turn's runtime and model are its agent's as the turn ends (null once the agent is deleted).
  await sql`
    CREATE FUNCTION usage_record_turn(subject uuid) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO usage_events (tenant_id, kind, subject_id, conversation_id, sandbox_id, status, reason,
        runtime, model, started_at, ended_at, busy_seconds,
        input_tokens, output_tokens, cache_read_tokens, cost_usd, created_at)
      SELECT t.tenant_id, 'turn', t.id, t.conversation_id, t.sandbox_id, t.status, NULL,
        a.runtime, a.model, t.started_at, coalesce(t.ended_at, now()),
        GREATEST(0, EXTRACT(EPOCH FROM coalesce(t.ended_at, now()) - t.started_at)),
        usage_count(t.usage->'input_tokens'),
        usage_count(t.usage->'output_tokens'),
        usage_count(t.usage->'cache_read_tokens'),
        usage_cost(t.usage->'cost_usd'),
        coalesce(t.ended_at, now())
      FROM turns t
      JOIN conversations c ON c.id = t.conversation_id
      LEFT JOIN agents a ON a.id = c.agent_id
      WHERE t.id = subject AND t.started_at IS NOT NULL
      ON CONFLICT (kind, subject_id) DO NOTHING;
    END $$`.execute(db);

  // plpgsql, not sql: its statements' plans are kept for the session, where a sql function called
  // from a trigger is planned again on every call (bench-usage.ts measures the difference).
  // Busy: each turn of the sandbox clipped to the sandbox's ready life (a turn still open as the
  // sandbox ends counts until the end). The turns are found through the conversation's index.
  await sql`
    CREATE FUNCTION usage_record_sandbox(subject uuid) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      WITH s AS (
        SELECT s.*, coalesce(s.ended_at, now()) AS until FROM sandboxes s WHERE s.id = subject
      ), busy AS (
        SELECT coalesce(sum(GREATEST(0, EXTRACT(EPOCH FROM
          LEAST(coalesce(t.ended_at, s.until), s.until) - GREATEST(t.started_at, s.ready_at)))), 0) AS seconds
        FROM s JOIN turns t ON t.conversation_id = s.conversation_id AND t.sandbox_id = s.id
        WHERE s.ready_at IS NOT NULL AND t.started_at IS NOT NULL
      )
      INSERT INTO usage_events (tenant_id, kind, subject_id, conversation_id, sandbox_id, status, reason,
        runtime, model, started_at, ready_at, ended_at, busy_seconds, parked_seconds, created_at)
      SELECT s.tenant_id, 'sandbox', s.id, s.conversation_id, s.id, s.status, s.reason,
        a.runtime, a.model, s.created_at, s.ready_at, s.until,
        CASE WHEN s.ready_at IS NULL THEN 0 ELSE LEAST(busy.seconds,
          GREATEST(0, EXTRACT(EPOCH FROM s.until - s.ready_at))) END,
        CASE WHEN s.ready_at IS NULL THEN 0 ELSE GREATEST(0, EXTRACT(EPOCH FROM s.until - s.ready_at) - busy.seconds) END,
        s.until
      FROM s CROSS JOIN busy
      JOIN conversations c ON c.id = s.conversation_id
      LEFT JOIN agents a ON a.id = c.agent_id
      ON CONFLICT (kind, subject_id) DO NOTHING;
    END $$`.execute(db);

  await sql`
    CREATE FUNCTION usage_turn_ended() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM usage_record_turn(NEW.id);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER usage_turn_ended AFTER UPDATE OF status ON turns
    FOR EACH ROW
    WHEN (OLD.status IN ('queued', 'running') AND NEW.status IN ('succeeded', 'failed', 'interrupted'))
    EXECUTE FUNCTION usage_turn_ended()`.execute(db);

  await sql`
    CREATE FUNCTION usage_sandbox_ended() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM usage_record_sandbox(NEW.id);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER usage_sandbox_ended AFTER UPDATE OF status ON sandboxes
    FOR EACH ROW
    WHEN (OLD.status IN ('pending', 'starting', 'ready') AND NEW.status IN ('terminated', 'failed'))
    EXECUTE FUNCTION usage_sandbox_ended()`.execute(db);

  await sql`SELECT usage_record_turn(id) FROM turns WHERE status IN ('succeeded', 'failed', 'interrupted')`.execute(
    db,
  );
  await sql`SELECT usage_record_sandbox(id) FROM sandboxes WHERE status IN ('terminated', 'failed')`.execute(
    db,
  );
}
