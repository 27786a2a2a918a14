// All SQL of billing_accounts that core billing runs (the webhooks write rows in webhook-apply.ts).
// Tenant first: every function takes the user id, the account's own tenant id.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { SubscriptionStatus } from './billing.tables.ts';

export interface BillingAccountRow {
  user_id: string;
  customer_id: string | null;
  subscription_id: string | null;
  status: SubscriptionStatus;
  trial_ends_at: Date | null;
  current_period_end: Date | null;
  cancel_at_period_end: boolean;
  legacy: boolean;
}

const COLUMNS = [
  'user_id',
  'customer_id',
  'subscription_id',
  'status',
  'trial_ends_at',
  'current_period_end',
  'cancel_at_period_end',
  'legacy',
] as const;

export async function findBillingAccount(db: Db, userId: string): Promise<BillingAccountRow | undefined> {
  return await db
    .selectFrom('billing_accounts')
    .select(COLUMNS)
    .where('user_id', '=', userId)
    .executeTakeFirst();
}

/** The row and whether its trial is still running on the database's clock (the local clock). */
export async function findGateState(
  db: Db,
  userId: string,
): Promise<
  { status: SubscriptionStatus; legacy: boolean; trial_ends_at: Date | null; trial_live: boolean } | undefined
> {
  return await db
    .selectFrom('billing_accounts')
    .select([
      'status',
      'legacy',
      'trial_ends_at',
      sql<boolean>`coalesce(trial_ends_at > now(), false)`.as('trial_live'),
    ])
    .where('user_id', '=', userId)
    .executeTakeFirst();
}

/** The trial clock of a new account, in its registration transaction. */
export async function insertTrial(db: Db, userId: string, trialDays: number): Promise<void> {
  await db
    .insertInto('billing_accounts')
    .values({
      user_id: userId,
      status: 'trialing',
      trial_ends_at: sql<Date>`now() + make_interval(days => ${trialDays})`,
    })
    .onConflict((oc) => oc.column('user_id').doNothing())
    .execute();
}

/**
 * Records the processor's customer of an account, once: the first writer wins, and the
 * customer of record is returned (a concurrent checkout may have set it first).
 */
export async function setCustomerOnce(db: Db, userId: string, customerId: string): Promise<string> {
  await db
    .updateTable('billing_accounts')
    .set({ customer_id: customerId, updated_at: sql`now()` })
    .where('user_id', '=', userId)
    .where('customer_id', 'is', null)
    .execute();
  const row = await findBillingAccount(db, userId);
  return row?.customer_id ?? customerId;
}

/** The processor's answer to a cancel-at-period-end change, on the subscription of record only. */
export async function setCancelAtPeriodEnd(
  db: Db,
  userId: string,
  subscriptionId: string,
  values: { cancelAtPeriodEnd: boolean; currentPeriodEnd: Date | null },
): Promise<void> {
  await db
    .updateTable('billing_accounts')
    .set({
      cancel_at_period_end: values.cancelAtPeriodEnd,
      ...(values.currentPeriodEnd ? { current_period_end: values.currentPeriodEnd } : {}),
      updated_at: sql`now()`,
    })
    .where('user_id', '=', userId)
    .where('subscription_id', '=', subscriptionId)
    .execute();
}

/**
 * Accounts whose trial clock expire-legacy-trials starts: those with no row (registered before
 * billing was on) and legacy rows with no trial end. Inserted or updated with a trial of `days`.
 */
export async function legacyTrialCandidates(db: Db): Promise<{ user_id: string; has_row: boolean }[]> {
  const noRow = await db
    .selectFrom('users')
    .leftJoin('billing_accounts', 'billing_accounts.user_id', 'users.id')
    .select(['users.id as user_id'])
    .where('billing_accounts.user_id', 'is', null)
    .orderBy('users.id')
    .execute();
  const legacyRows = await db
    .selectFrom('billing_accounts')
    .select('user_id')
    .where('legacy', '=', true)
    .where('trial_ends_at', 'is', null)
    .where('status', '=', 'trialing')
    .orderBy('user_id')
    .execute();
  return [
    ...noRow.map((r) => ({ user_id: r.user_id, has_row: false })),
    ...legacyRows.map((r) => ({ user_id: r.user_id, has_row: true })),
  ];
}

/** Starts one legacy account's trial clock; false when it no longer qualifies (a concurrent run, a checkout). */
export async function startLegacyTrial(db: Db, userId: string, days: number): Promise<boolean> {
  const ends = sql<Date>`now() + make_interval(days => ${days})`;
  const inserted = await db
    .insertInto('billing_accounts')
    .values({ user_id: userId, status: 'trialing', legacy: true, trial_ends_at: ends })
    .onConflict((oc) => oc.column('user_id').doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return true;
  const updated = await db
    .updateTable('billing_accounts')
    .set({ trial_ends_at: ends, updated_at: sql`now()` })
    .where('user_id', '=', userId)
    .where('legacy', '=', true)
    .where('trial_ends_at', 'is', null)
    .where('status', '=', 'trialing')
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) > 0;
}
