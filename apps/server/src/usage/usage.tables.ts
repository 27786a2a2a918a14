import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export type UsageKind = 'sandbox' | 'turn';

/**
 * One sandbox lifetime or one turn that ran, written by the triggers of migration 0029 as the
 * sandbox or the turn ends; never by the application.
 */
export interface UsageEventsTable {
  /** bigint: read as a number (db/database.ts). */
  id: Generated<number>;
  tenant_id: string;
  kind: UsageKind;
  /** The sandbox's or the turn's id: one event each. */
  subject_id: string;
  conversation_id: string;
  sandbox_id: string | null;
  /** The sandbox's end status (terminated, failed) or the turn's (succeeded, failed, interrupted). */
  status: string;
  /** The sandbox's reason (null for a turn). */
  reason: string | null;
  runtime: string | null;
  model: string | null;
  started_at: Timestamp;
  ready_at: NullableTimestamp;
  ended_at: Timestamp;
  busy_seconds: number;
  parked_seconds: number;
  input_tokens: number | null;
  output_tokens: number | null;
  cache_read_tokens: number | null;
  /** numeric: returned by pg as a string. */
  cost_usd: string | null;
  created_at: Timestamp;
}

export interface UsageTables {
  usage_events: UsageEventsTable;
}
