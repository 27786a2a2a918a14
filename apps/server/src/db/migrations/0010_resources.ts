import { type Kysely, sql } from 'kysely';

// Tenant data keys, environments, vaults, their encrypted secrets, and agents.
// Cross-tenant references are structurally impossible: every child row carries the
// tenant id and references its parent through the composite (tenant_id, id) key.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  // One wrapped data key per tenant (tenant = user account). key_version is the
  // fingerprint of the master key that wrapped it (src/secrets/INVARIANTS.md).
  await sql`
    CREATE TABLE tenant_keys (
      tenant_id uuid PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
      wrapped_key bytea NOT NULL,
      key_version text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX tenant_keys_version_idx ON tenant_keys (key_version, tenant_id)`.execute(db);

  await sql`
    CREATE TABLE environments (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL,
      env_vars jsonb NOT NULL DEFAULT '{}'::jsonb,
      packages jsonb NOT NULL DEFAULT '{}'::jsonb,
      repos jsonb NOT NULL DEFAULT '[]'::jsonb,
      setup_script text,
      networking_type text NOT NULL DEFAULT 'unrestricted' CHECK (networking_type IN ('unrestricted', 'limited')),
      networking_config jsonb NOT NULL DEFAULT '{"allowed_hosts": []}'::jsonb,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      checkpoint_id text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, name),
      UNIQUE (tenant_id, id)
    )`.execute(db);

  await sql`
    CREATE TABLE vaults (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, name),
      UNIQUE (tenant_id, id)
    )`.execute(db);

  // Secrets of environments and vaults: exactly one owner. ciphertext is
  // version(1) | nonce(12) | AES-256-GCM ciphertext | tag(16) under the tenant data key,
  // with tenant, owner and key name bound as associated data. value_mac is a keyed
  // HMAC (subkey of the tenant key) used to detect "unchanged" in bulk apply.
  await sql`
    CREATE TABLE secrets (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      environment_id uuid,
      vault_id uuid,
      key text NOT NULL,
      ciphertext bytea NOT NULL,
      value_mac bytea NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((environment_id IS NULL) <> (vault_id IS NULL)),
      FOREIGN KEY (tenant_id, environment_id) REFERENCES environments (tenant_id, id) ON DELETE CASCADE,
      FOREIGN KEY (tenant_id, vault_id) REFERENCES vaults (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX secrets_environment_key_idx ON secrets (environment_id, key) WHERE environment_id IS NOT NULL`.execute(
    db,
  );
  await sql`CREATE UNIQUE INDEX secrets_vault_key_idx ON secrets (vault_id, key) WHERE vault_id IS NOT NULL`.execute(
    db,
  );

  // Deleting an environment that agents still use is refused (409 in the API); the
  // foreign key is the backstop against a race.
  await sql`
    CREATE TABLE agents (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL,
      model text NOT NULL,
      runtime text NOT NULL CHECK (runtime IN ('claude', 'codex', 'gemini', 'opencode')),
      environment_id uuid,
      system text,
      description text,
      skills jsonb NOT NULL DEFAULT '[]'::jsonb,
      mcp_servers jsonb NOT NULL DEFAULT '{}'::jsonb,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, name),
      UNIQUE (tenant_id, id),
      FOREIGN KEY (tenant_id, environment_id) REFERENCES environments (tenant_id, id) ON DELETE RESTRICT
    )`.execute(db);
  await sql`CREATE INDEX agents_environment_idx ON agents (environment_id) WHERE environment_id IS NOT NULL`.execute(
    db,
  );

  // An agent's vault allowlist. Deleting a vault removes it from every allowlist.
  await sql`
    CREATE TABLE agent_vaults (
      tenant_id uuid NOT NULL,
      agent_id uuid NOT NULL,
      vault_id uuid NOT NULL,
      PRIMARY KEY (agent_id, vault_id),
      FOREIGN KEY (tenant_id, agent_id) REFERENCES agents (tenant_id, id) ON DELETE CASCADE,
      FOREIGN KEY (tenant_id, vault_id) REFERENCES vaults (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE INDEX agent_vaults_vault_idx ON agent_vaults (vault_id)`.execute(db);
}
