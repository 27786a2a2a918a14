import { type Kysely, sql } from 'kysely';

// Per-account inference provider credentials (issue 10, item 4): at most one per provider and
// account. The API key is sealed like every secret (src/secrets/INVARIANTS.md): AES-256-GCM
// under the tenant data key, bound to tenant and provider as associated data. The base URL is
// not secret (the API returns it) and is stored as written. Deleting the account deletes them.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE inference_credentials (
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      provider text NOT NULL CHECK (provider IN ('anthropic', 'openai', 'gemini')),
      ciphertext bytea NOT NULL,
      base_url text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, provider)
    )`.execute(db);
}
