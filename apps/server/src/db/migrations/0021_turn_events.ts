import { type Kysely, sql } from 'kysely';

// Turn events (issue 10): the runtimes' JSON lines read into common turn events (assistant
// text, tool calls and results, errors, usage, session id, raw lines) are stored with the
// turn as log_events rows of a fourth stream, `events`, whose `data` is the redacted event
// as UTF-8 JSON. They share the conversation's ids, order, budget and readers with the
// output and stage rows.
//
// The widened CHECK is added NOT VALID: the constraint it replaces admitted a subset of what
// it admits, so every existing row satisfies it, and skipping the validation scan keeps the
// migration from holding log_events' exclusive lock for a pass over the whole log.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    ALTER TABLE log_events
      DROP CONSTRAINT log_events_stream_check,
      ADD CONSTRAINT log_events_stream_check
        CHECK (stream IN ('stdout', 'stderr', 'stage', 'events')) NOT VALID,
      ADD CONSTRAINT log_events_events_data_check
        CHECK (stream <> 'events' OR data IS NOT NULL) NOT VALID`.execute(db);
}
