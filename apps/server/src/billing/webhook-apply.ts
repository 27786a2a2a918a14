// What a verified payment-processor event does to the account it concerns. Runs inside the
// webhook's claim transaction (webhook.routes.ts) on rows locked FOR UPDATE. What must hold
// (test/billing.webhooks.test.ts):
// - Keyed by the subscription of record (billing_accounts.subscription_id): an event of any
//   other subscription never touches an account. A subscription becomes the record through
//   `checkout.session.completed` (client_reference_id = the user id, its customer and
//   subscription) when the account has no live record, or through a subscription event of the
//   account's customer (customer_id) while the account has none, or only a canceled one.
// - Order-aware: an event older (processor `created`) than the state the account holds
//   (state_at) changes nothing; each applied state moves state_at to its event's time. Two
//   events of the same second apply in arrival order.
// - `invoice.paid` writes status only on dunning recovery (past_due → active).
//   `invoice.payment_failed` moves an active or trialing account to past_due.
//   `invoice.payment_action_required` changes nothing but mails the person.
// - A comped account's status is never changed by an event (admins grant it).
// - The object's fields are read leniently across the processor's API versions (the invoice's
//   subscription under `parent.subscription_details` or at its top level; the period end on
//   the subscription items or the subscription); an object without what the event needs is a
//   failed apply, recorded, listed on the admin pages and redelivered by the processor.
import { z } from 'zod';
import type { Db } from '../db/database.ts';
import { isUuid } from '../resources/fields.ts';
import type { SubscriptionStatus } from './billing.tables.ts';
import type { BillingMailKind } from './billing-mail.ts';
import {
  type AccountWrite,
  lockAdoptable,
  lockBySubscription,
  lockByUser,
  writeAccount,
} from './webhook.repo.ts';

/** The events this webhook acts on; every other type is claimed and ignored. */
export const HANDLED_EVENT_TYPES = [
  'checkout.session.completed',
  'customer.subscription.created',
  'customer.subscription.updated',
  'customer.subscription.deleted',
  'invoice.paid',
  'invoice.payment_failed',
  'invoice.payment_action_required',
] as const;

export interface VerifiedEvent {
  id: string;
  type: string;
  created: Date;
  object: unknown;
}

export interface ApplyResult {
  outcome: 'applied' | 'ignored';
  userId: string | null;
  subscriptionId: string | null;
  /** Why the event changed nothing (logged). */
  reason?: string;
  mails: BillingMailKind[];
}

const Id = z.string().min(1).max(255);
/** An expandable reference: the id, or the expanded object with its id. */
const Ref = z.union([Id, z.object({ id: Id })]).transform((v) => (typeof v === 'string' ? v : v.id));
const Seconds = z.number().int().nonnegative();

const SubscriptionObject = z.object({
  id: Id,
  customer: Ref,
  status: z.string(),
  cancel_at_period_end: z.boolean().nullish(),
  current_period_end: Seconds.nullish(),
  trial_end: Seconds.nullish(),
  items: z.object({ data: z.array(z.object({ current_period_end: Seconds.nullish() })) }).nullish(),
});

const InvoiceObject = z.object({
  id: Id,
  subscription: Ref.nullish(),
  parent: z.object({ subscription_details: z.object({ subscription: Ref }).nullish() }).nullish(),
});

const CheckoutSessionObject = z.object({
  id: Id,
  mode: z.string().nullish(),
  payment_status: z.string().nullish(),
  client_reference_id: z.string().nullish(),
  customer: Ref.nullish(),
  subscription: Ref.nullish(),
});

const at = (seconds: number) => new Date(seconds * 1000);

/** The processor's subscription status as ours; null: no status to take (`incomplete`: not paid yet). */
export function statusOf(processorStatus: string): SubscriptionStatus | null {
  switch (processorStatus) {
    case 'trialing':
    case 'active':
    case 'past_due':
    case 'canceled':
      return processorStatus;
    case 'unpaid':
    case 'paused':
      return 'past_due';
    case 'incomplete_expired':
      return 'canceled';
    default:
      return null;
  }
}

/** The mails a status change sends. */
function transitionMails(from: SubscriptionStatus, to: SubscriptionStatus): BillingMailKind[] {
  if (from === to) return [];
  if (from === 'past_due' && to === 'active') return ['payment_recovered'];
  if (to === 'canceled') return ['subscription_canceled'];
  return [];
}

const ignored = (reason: string, userId: string | null, subscriptionId: string | null): ApplyResult => ({
  outcome: 'ignored',
  userId,
  subscriptionId,
  reason,
  mails: [],
});

const isStale = (event: VerifiedEvent, stateAt: Date | null) =>
  stateAt !== null && event.created.getTime() < stateAt.getTime();

export async function applyEvent(trx: Db, event: VerifiedEvent): Promise<ApplyResult> {
  switch (event.type) {
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted':
      return await applySubscription(trx, event);
    case 'invoice.paid':
    case 'invoice.payment_failed':
    case 'invoice.payment_action_required':
      return await applyInvoice(trx, event);
    case 'checkout.session.completed':
      return await applyCheckout(trx, event);
    default:
      return ignored(`event type ${event.type} is not handled`, null, null);
  }
}

async function applySubscription(trx: Db, event: VerifiedEvent): Promise<ApplyResult> {
  const sub = SubscriptionObject.parse(event.object);
  const deleted = event.type === 'customer.subscription.deleted';
  const next = deleted ? 'canceled' : statusOf(sub.status);
  let row = await lockBySubscription(trx, sub.id);
  // A new subscription of the customer becomes the record only while the account has no live
  // one; an ended subscription is never adopted.
  if (!row && next !== 'canceled') row = await lockAdoptable(trx, sub.customer);
  if (!row) return ignored('not the subscription of record of any account', null, sub.id);
  if (isStale(event, row.state_at))
    return ignored('older than the state the account holds', row.user_id, sub.id);

  const status = row.status === 'comped' ? 'comped' : (next ?? row.status);
  const periodEnd = sub.items?.data[0]?.current_period_end ?? sub.current_period_end ?? null;
  const write: AccountWrite = {
    subscription_id: sub.id,
    customer_id: sub.customer,
    status,
    current_period_end: periodEnd === null ? null : at(periodEnd),
    cancel_at_period_end: deleted ? false : (sub.cancel_at_period_end ?? false),
    state_at: event.created,
  };
  if (status === 'trialing' && sub.trial_end) write.trial_ends_at = at(sub.trial_end);
  await writeAccount(trx, row.user_id, write);
  return {
    outcome: 'applied',
    userId: row.user_id,
    subscriptionId: sub.id,
    mails: transitionMails(row.status, status),
  };
}

async function applyInvoice(trx: Db, event: VerifiedEvent): Promise<ApplyResult> {
  const invoice = InvoiceObject.parse(event.object);
  const subscriptionId = invoice.parent?.subscription_details?.subscription ?? invoice.subscription ?? null;
  if (!subscriptionId) return ignored('not a subscription invoice', null, null);
  const row = await lockBySubscription(trx, subscriptionId);
  if (!row) return ignored('not the subscription of record of any account', null, subscriptionId);
  if (isStale(event, row.state_at)) {
    return ignored('older than the state the account holds', row.user_id, subscriptionId);
  }
  const applied = (mails: BillingMailKind[]): ApplyResult => ({
    outcome: 'applied',
    userId: row.user_id,
    subscriptionId,
    mails,
  });
  switch (event.type) {
    case 'invoice.paid':
      if (row.status !== 'past_due') {
        return ignored('paid outside dunning: status unchanged', row.user_id, subscriptionId);
      }
      await writeAccount(trx, row.user_id, { status: 'active', state_at: event.created });
      return applied(['payment_recovered']);
    case 'invoice.payment_failed':
      if (row.status === 'active' || row.status === 'trialing') {
        await writeAccount(trx, row.user_id, { status: 'past_due', state_at: event.created });
      }
      return applied(row.status === 'comped' || row.status === 'canceled' ? [] : ['payment_failed']);
    default:
      return applied(row.status === 'comped' || row.status === 'canceled' ? [] : ['payment_action_required']);
  }
}

async function applyCheckout(trx: Db, event: VerifiedEvent): Promise<ApplyResult> {
  const session = CheckoutSessionObject.parse(event.object);
  const userId = session.client_reference_id ?? null;
  const subscriptionId = session.subscription ?? null;
  if (session.mode && session.mode !== 'subscription')
    return ignored('not a subscription checkout', null, null);
  if (!userId || !isUuid(userId) || !subscriptionId || !session.customer) {
    return ignored('no account, customer or subscription on the session', null, subscriptionId);
  }
  const row = await lockByUser(trx, userId);
  if (!row) return ignored('the account has no billing row', null, subscriptionId);
  if (row.subscription_id === subscriptionId) {
    if (row.customer_id === null) await writeAccount(trx, row.user_id, { customer_id: session.customer });
    return { outcome: 'applied', userId, subscriptionId, mails: [] };
  }
  if (row.subscription_id !== null && row.status !== 'canceled') {
    return ignored('the account already has a live subscription of record', userId, subscriptionId);
  }
  const write: AccountWrite = { customer_id: session.customer, subscription_id: subscriptionId };
  // A paid checkout started the subscription: active, unless a newer state is already held
  // (the subscription's own events, which also carry trials, set it precisely).
  if (session.payment_status === 'paid' && row.status !== 'comped' && !isStale(event, row.state_at)) {
    write.status = 'active';
    write.cancel_at_period_end = false;
    write.state_at = event.created;
  }
  await writeAccount(trx, row.user_id, write);
  return { outcome: 'applied', userId, subscriptionId, mails: [] };
}
