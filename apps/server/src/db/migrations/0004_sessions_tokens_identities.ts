import { type Kysely, sql } from 'kysely';

// Browser sessions, single-use email tokens (verification, password reset, email change),
// OAuth identities and the once-per-user welcome mail marker. Every secret is stored as
// its SHA-256, never in plaintext.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE users ADD COLUMN welcome_sent_at timestamptz`.execute(db);
  await sql`CREATE INDEX users_unverified_created_idx ON users (created_at) WHERE email_verified_at IS NULL`.execute(
    db,
  );

  await sql`
    CREATE TABLE sessions (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      token_hash bytea NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      ip text,
      user_agent text
    )`.execute(db);
  await sql`CREATE INDEX sessions_user_id_idx ON sessions (user_id)`.execute(db);

  await sql`
    CREATE TABLE email_tokens (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      purpose text NOT NULL CHECK (purpose IN ('verify_email', 'password_reset', 'email_change')),
      token_hash bytea NOT NULL UNIQUE,
      new_email citext,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      used_at timestamptz,
      CHECK ((purpose = 'email_change') = (new_email IS NOT NULL))
    )`.execute(db);
  await sql`CREATE INDEX email_tokens_user_idx ON email_tokens (user_id, purpose)`.execute(db);

  await sql`
    CREATE TABLE oauth_identities (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      provider text NOT NULL,
      provider_user_id text NOT NULL,
      email citext NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (provider, provider_user_id)
    )`.execute(db);
  await sql`CREATE INDEX oauth_identities_user_idx ON oauth_identities (user_id)`.execute(db);
}
