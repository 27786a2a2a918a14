import type { ColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface TenantKeysTable {
  tenant_id: string;
  /** version(1) | nonce(12) | AES-256-GCM(tenant data key) | tag(16), under the master key. */
  wrapped_key: Buffer;
  /** Fingerprint of the master key that wrapped it (never the key itself). */
  key_version: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SecretsTable {
  id: string;
  tenant_id: string;
  environment_id: string | null;
  vault_id: string | null;
  key: string;
  ciphertext: Buffer;
  value_mac: Buffer;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SecretsTables {
  tenant_keys: TenantKeysTable;
  secrets: SecretsTable;
}
