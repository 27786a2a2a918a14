// The SQL of the billing webhook: the claim of an event id, the failure record, and the
// account rows an event may touch (always locked FOR UPDATE inside the claim's transaction,
// so two events of one account apply one after the other and each sees the other's state).
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { BillingEventOutcome, SubscriptionStatus } from './billing.tables.ts';

export interface EventHead {
  id: string;
  type: string;
  /** The processor's `created` time of the event. */
  createdAt: Date;
}

/**
 * Claims the event id inside the caller's transaction. True: this delivery applies it. False:
 * it was applied (or ignored) before, or a concurrent delivery holds the claim and commits it
 * (the insert waits on that transaction's row and then finds it). A claim whose earlier apply
 * failed is taken again (its `attempts` grows); the caller's rollback undoes the claim.
 */
export async function claimEvent(trx: Db, head: EventHead): Promise<boolean> {
  const row = await sql<{ id: string }>`
    INSERT INTO billing_events (id, type, created_at, outcome)
    VALUES (${head.id}, ${head.type}, ${head.createdAt}, 'applied')
    ON CONFLICT (id) DO UPDATE
      SET attempts = billing_events.attempts + 1, outcome = 'applied', error = NULL
      WHERE billing_events.outcome = 'failed'
    RETURNING id`.execute(trx);
  return row.rows.length === 1;
}

/** Completes the claim with what the apply did (inside the claim's transaction). */
export async function finishClaim(
  trx: Db,
  id: string,
  done: {
    outcome: Exclude<BillingEventOutcome, 'failed'>;
    userId: string | null;
    subscriptionId: string | null;
  },
): Promise<void> {
  await trx
    .updateTable('billing_events')
    .set({
      outcome: done.outcome,
      user_id: done.userId,
      subscription_id: done.subscriptionId,
      applied_at: sql<Date>`now()`,
      error: null,
    })
    .where('id', '=', id)
    .execute();
}

/**
 * Records a failed apply, outside the rolled-back transaction: listed on the admin pages until
 * a redelivery applies it; `received_at` is the last failed delivery (the list's order, and the\n * retention's clock). An event applied meanwhile (a concurrent redelivery) stays applied.
 */
export async function recordFailure(db: Db, head: EventHead, error: string): Promise<void> {
  await sql`
    INSERT INTO billing_events (id, type, created_at, outcome, error, applied_at)
    VALUES (${head.id}, ${head.type}, ${head.createdAt}, 'failed', ${error}, NULL)
    ON CONFLICT (id) DO UPDATE
      SET attempts = billing_events.attempts + 1, error = EXCLUDED.error, received_at = now()
      WHERE billing_events.outcome = 'failed'`.execute(db);
}

export interface LockedAccount {
  user_id: string;
  customer_id: string | null;
  subscription_id: string | null;
  status: SubscriptionStatus;
  trial_ends_at: Date | null;
  state_at: Date | null;
}

const COLUMNS = ['user_id', 'customer_id', 'subscription_id', 'status', 'trial_ends_at', 'state_at'] as const;

/** The account whose subscription of record this is. */
export async function lockBySubscription(
  trx: Db,
  subscriptionId: string,
): Promise<LockedAccount | undefined> {
  return await trx
    .selectFrom('billing_accounts')
    .select(COLUMNS)
    .where('subscription_id', '=', subscriptionId)
    .forUpdate()
    .executeTakeFirst();
}

/**
 * The account of this customer that may take a new subscription as its record: it has none
 * yet, or the one it had is canceled (the customer subscribed again). A live subscription of
 * record is never replaced.
 */
export async function lockAdoptable(trx: Db, customerId: string): Promise<LockedAccount | undefined> {
  return await trx
    .selectFrom('billing_accounts')
    .select(COLUMNS)
    .where('customer_id', '=', customerId)
    .where((eb) => eb.or([eb('subscription_id', 'is', null), eb('status', '=', 'canceled')]))
    .forUpdate()
    .executeTakeFirst();
}

export async function lockByUser(trx: Db, userId: string): Promise<LockedAccount | undefined> {
  return await trx
    .selectFrom('billing_accounts')
    .select(COLUMNS)
    .where('user_id', '=', userId)
    .forUpdate()
    .executeTakeFirst();
}

export interface AccountWrite {
  customer_id?: string;
  subscription_id?: string;
  status?: SubscriptionStatus;
  trial_ends_at?: Date;
  current_period_end?: Date | null;
  cancel_at_period_end?: boolean;
  state_at?: Date;
}

export async function writeAccount(trx: Db, userId: string, set: AccountWrite): Promise<void> {
  await trx
    .updateTable('billing_accounts')
    .set({ ...set, updated_at: sql<Date>`now()` })
    .where('user_id', '=', userId)
    .execute();
}
