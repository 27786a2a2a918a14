import { type Kysely, sql } from 'kysely';

// Account security (issue 14): the per-address failed sign-in throttle, the per-recipient
// mail cap, and the moment a user's credentials last changed (a reset or a password
// change), before which no email-change link may still be minted. Addresses are stored
// only as SHA-256 of their lower-cased form: these tables never hold an address.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE users ADD COLUMN credentials_changed_at timestamptz`.execute(db);

  await sql`
    CREATE TABLE login_failures (
      email_key bytea PRIMARY KEY,
      failures integer NOT NULL,
      window_started_at timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX login_failures_window_idx ON login_failures (window_started_at)`.execute(db);

  await sql`
    CREATE TABLE mail_sends (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      recipient_key bytea NOT NULL,
      sent_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX mail_sends_recipient_idx ON mail_sends (recipient_key, sent_at)`.execute(db);
  await sql`CREATE INDEX mail_sends_sent_at_idx ON mail_sends (sent_at)`.execute(db);
}
