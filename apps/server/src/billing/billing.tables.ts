import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

/** Spec: Resources, subscription status values. */
export type SubscriptionStatus = 'trialing' | 'active' | 'past_due' | 'canceled' | 'comped';

/** One row per account once billing is on (migration 0035_billing). */
export interface BillingAccountsTable {
  user_id: string;
  customer_id: string | null;
  /** The subscription of record: events of any other subscription never touch the row. */
  subscription_id: string | null;
  status: SubscriptionStatus;
  trial_ends_at: NullableTimestamp;
  current_period_end: NullableTimestamp;
  cancel_at_period_end: Generated<boolean>;
  /** The processor's `created` time of the event whose state the row holds (order-awareness). */
  state_at: NullableTimestamp;
  /** Predates billing: the expire-legacy-trials release task starts its trial clock. */
  legacy: Generated<boolean>;
  trial_ending_notified_at: NullableTimestamp;
  trial_expired_notified_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type BillingEventOutcome = 'applied' | 'ignored' | 'failed';

/** The claim of each processor event id, and the failures the admin pages list. */
export interface BillingEventsTable {
  id: string;
  type: string;
  subscription_id: string | null;
  user_id: string | null;
  /** The event's own `created` time. */
  created_at: Timestamp;
  received_at: Timestamp;
  applied_at: NullableTimestamp;
  outcome: ColumnType<BillingEventOutcome, BillingEventOutcome | undefined, BillingEventOutcome>;
  error: string | null;
  attempts: Generated<number>;
}

export interface BillingTables {
  billing_accounts: BillingAccountsTable;
  billing_events: BillingEventsTable;
}
