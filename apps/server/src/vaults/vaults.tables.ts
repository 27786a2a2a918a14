import type { ColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface VaultsTable {
  id: string;
  tenant_id: string;
  name: string;
  metadata: ColumnType<Record<string, unknown>, string, string>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface VaultsTables {
  vaults: VaultsTable;
}
