import type { ColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/** jsonb: read parsed, written as JSON text. */
type Json<T> = ColumnType<T, string, string>;

export interface RepoEntry {
  url: string;
  ref?: string;
  token_secret?: string;
}

export interface EnvironmentsTable {
  id: string;
  tenant_id: string;
  name: string;
  env_vars: Json<Record<string, string>>;
  packages: Json<Record<string, string>>;
  repos: Json<RepoEntry[]>;
  setup_script: string | null;
  networking_type: 'unrestricted' | 'limited';
  networking_config: Json<{ allowed_hosts: string[] }>;
  metadata: Json<Record<string, unknown>>;
  checkpoint_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface EnvironmentsTables {
  environments: EnvironmentsTable;
}
