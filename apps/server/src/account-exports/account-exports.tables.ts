import type { ColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export type AccountExportStatus = 'pending' | 'building' | 'ready' | 'failed';

export interface AccountExportsTable {
  id: string;
  tenant_id: string;
  status: ColumnType<AccountExportStatus, AccountExportStatus | undefined, AccountExportStatus>;
  /** Bytes of the gzipped payload, once ready. bigint: returned by pg as a string. */
  size_bytes: ColumnType<string | null, string | number | null | undefined, string | number | null>;
  failure_reason: string | null;
  created_at: Timestamp;
  started_at: NullableTimestamp;
  completed_at: NullableTimestamp;
  expires_at: NullableTimestamp;
}

/** The gzipped payload of a ready export, in order of `seq` (account-exports.build.ts). */
export interface AccountExportChunksTable {
  export_id: string;
  seq: number;
  data: Buffer;
}

export interface AccountExportsTables {
  account_exports: AccountExportsTable;
  account_export_chunks: AccountExportChunksTable;
}
