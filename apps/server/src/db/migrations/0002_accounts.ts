import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE users (
      id uuid PRIMARY KEY,
      email citext NOT NULL UNIQUE,
      password_hash text,
      email_verified_at timestamptz,
      is_admin boolean NOT NULL DEFAULT false,
      suspended_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);

  await sql`
    CREATE TABLE api_keys (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL,
      prefix text NOT NULL,
      key_hash bytea NOT NULL UNIQUE,
      scope text NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'conversation')),
      conversation_id uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz,
      expires_at timestamptz,
      revoked_at timestamptz,
      CHECK ((scope = 'conversation') = (conversation_id IS NOT NULL))
    )`.execute(db);
  await sql`CREATE INDEX api_keys_user_id_idx ON api_keys (user_id)`.execute(db);
}
