import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface UsersTable {
  id: string;
  email: string;
  password_hash: string | null;
  email_verified_at: NullableTimestamp;
  is_admin: Generated<boolean>;
  suspended_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ApiKeysTable {
  id: string;
  user_id: string;
  name: string;
  prefix: string;
  key_hash: Buffer;
  scope: ColumnType<'full' | 'conversation', 'full' | 'conversation' | undefined, never>;
  conversation_id: string | null;
  created_at: Timestamp;
  last_used_at: NullableTimestamp;
  expires_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

export interface AccountsTables {
  users: UsersTable;
  api_keys: ApiKeysTable;
}
