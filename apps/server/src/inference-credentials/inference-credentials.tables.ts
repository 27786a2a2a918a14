import type { ColumnType } from 'kysely';
import type { InferenceProvider } from './providers.ts';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface InferenceCredentialsTable {
  tenant_id: string;
  provider: InferenceProvider;
  /** version(1) | nonce(12) | AES-256-GCM(API key) | tag(16) under the tenant data key. */
  ciphertext: Buffer;
  base_url: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface InferenceCredentialsTables {
  inference_credentials: InferenceCredentialsTable;
}
