import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface UsersTable {
  id: string;
  email: string;
  /** Null for OAuth-only accounts. */
  password_hash: string | null;
  email_verified_at: NullableTimestamp;
  is_admin: Generated<boolean>;
  suspended_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  welcome_sent_at: NullableTimestamp;
  /** Last password reset or change: email-change mails requested before it are not sent. */
  credentials_changed_at: NullableTimestamp;
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

export interface SessionsTable {
  id: string;
  user_id: string;
  token_hash: Buffer;
  created_at: Timestamp;
  last_seen_at: Timestamp;
  expires_at: Timestamp;
  ip: string | null;
  user_agent: string | null;
}

export type EmailTokenPurpose = 'verify_email' | 'password_reset' | 'email_change';

export interface EmailTokensTable {
  id: string;
  user_id: string;
  purpose: EmailTokenPurpose;
  token_hash: Buffer;
  new_email: string | null;
  created_at: Timestamp;
  expires_at: Timestamp;
  used_at: NullableTimestamp;
}

export interface OAuthIdentitiesTable {
  id: string;
  user_id: string;
  provider: string;
  provider_user_id: string;
  email: string;
  created_at: Timestamp;
}

/** Failed sign-ins per address; email_key = SHA-256 of the lower-cased address. */
export interface LoginFailuresTable {
  email_key: Buffer;
  failures: number;
  window_started_at: Timestamp;
}

/** One row per capped account mail sent; recipient_key = SHA-256 of the lower-cased address. */
export interface MailSendsTable {
  id: Generated<string>;
  recipient_key: Buffer;
  sent_at: Timestamp;
}

export interface AccountsTables {
  users: UsersTable;
  api_keys: ApiKeysTable;
  sessions: SessionsTable;
  email_tokens: EmailTokensTable;
  oauth_identities: OAuthIdentitiesTable;
  login_failures: LoginFailuresTable;
  mail_sends: MailSendsTable;
}
