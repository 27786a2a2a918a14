import type { ColumnType } from 'kysely';

export interface AuditEventsTable {
  id: string;
  /** The tenant the event belongs to; null for instance-wide events. No foreign key: the row outlives nothing it must reference. */
  tenant_id: string | null;
  type: string;
  actor_kind: 'user' | 'api_key' | 'system';
  actor_user_id: string | null;
  actor_api_key_id: string | null;
  ip: string | null;
  metadata: ColumnType<Record<string, unknown>, string, never>;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

export interface AuditTables {
  audit_events: AuditEventsTable;
}
