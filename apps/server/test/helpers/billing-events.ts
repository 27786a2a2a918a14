// Payment-processor events as Stripe sends them (the pinned SDK's API version, 2026-10-28:
// the invoice's subscription under `parent.subscription_details`, the period end on the
// subscription items), signed with the SDK's own `generateTestHeaderString`, and the billing
// rows the webhook acts on, inserted directly (billing-core creates them at registration).
import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import Stripe from 'stripe';
import type { SubscriptionStatus } from '../../src/billing/billing.tables.ts';
import type { Db } from '../../src/db/database.ts';
import type { TestApp } from './app.ts';

export const WEBHOOK_SECRET = `whsec_${randomBytes(24).toString('hex')}`;
export const API_VERSION = '2026-10-28.endive';

const hex = (n = 12) => randomBytes(n).toString('hex');
export const newId = (prefix: 'evt' | 'sub' | 'cus' | 'in' | 'cs') => `${prefix}_${hex()}`;

/** Seconds since the epoch, as the processor writes times. */
export const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

export interface StripeEventJson {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  data: { object: Record<string, unknown> };
  livemode: false;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: string;
}

export function event(type: string, object: Record<string, unknown>, created: Date): StripeEventJson {
  return {
    id: newId('evt'),
    object: 'event',
    api_version: API_VERSION,
    created: seconds(created),
    data: { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

export function subscriptionObject(s: {
  id: string;
  customer: string;
  status: string;
  periodEnd?: Date;
  cancelAtPeriodEnd?: boolean;
  trialEnd?: Date | null;
}): Record<string, unknown> {
  const periodEnd = s.periodEnd ?? new Date(Date.now() + 30 * 86_400_000);
  return {
    id: s.id,
    object: 'subscription',
    customer: s.customer,
    status: s.status,
    cancel_at_period_end: s.cancelAtPeriodEnd ?? false,
    canceled_at: s.status === 'canceled' ? seconds(new Date()) : null,
    created: seconds(new Date(Date.now() - 86_400_000)),
    currency: 'usd',
    livemode: false,
    metadata: {},
    trial_end: s.trialEnd ? seconds(s.trialEnd) : null,
    items: {
      object: 'list',
      data: [
        {
          id: `si_${hex()}`,
          object: 'subscription_item',
          current_period_start: seconds(new Date(periodEnd.getTime() - 30 * 86_400_000)),
          current_period_end: seconds(periodEnd),
          price: { id: 'price_monthly', object: 'price', unit_amount: 1900, currency: 'usd' },
          quantity: 1,
        },
      ],
      has_more: false,
      url: `/v1/subscription_items?subscription=${s.id}`,
    },
  };
}

export function invoiceObject(s: {
  subscription: string;
  customer: string;
  status?: string;
}): Record<string, unknown> {
  return {
    id: newId('in'),
    object: 'invoice',
    customer: s.customer,
    status: s.status ?? 'open',
    amount_due: 1900,
    currency: 'usd',
    livemode: false,
    parent: {
      type: 'subscription_details',
      quote_details: null,
      subscription_details: { metadata: {}, subscription: s.subscription },
    },
  };
}

export function checkoutSessionObject(s: {
  userId: string;
  customer: string;
  subscription: string;
  paymentStatus?: string;
}): Record<string, unknown> {
  return {
    id: newId('cs'),
    object: 'checkout.session',
    mode: 'subscription',
    status: 'complete',
    payment_status: s.paymentStatus ?? 'paid',
    client_reference_id: s.userId,
    customer: s.customer,
    subscription: s.subscription,
    livemode: false,
  };
}

/** The Stripe-Signature header the SDK computes for this body. */
export function sign(payload: string, opts: { secret?: string; timestamp?: number } = {}): string {
  return Stripe.webhooks.generateTestHeaderString({
    payload,
    secret: opts.secret ?? WEBHOOK_SECRET,
    ...(opts.timestamp !== undefined ? { timestamp: opts.timestamp } : {}),
  });
}

export async function deliver(
  t: TestApp,
  body: StripeEventJson | string,
  opts: { secret?: string; timestamp?: number; header?: string } = {},
): Promise<LightMyRequestResponse> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return await t.app.inject({
    method: 'POST',
    url: '/api/billing/webhook',
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'stripe-signature': opts.header ?? sign(payload, opts),
    },
    payload,
  });
}

export interface BillingRowInput {
  status: SubscriptionStatus;
  customerId?: string | null;
  subscriptionId?: string | null;
  trialEndsAt?: Date | null;
  stateAt?: Date | null;
}

export async function insertBillingRow(db: Db, userId: string, row: BillingRowInput): Promise<void> {
  await db
    .insertInto('billing_accounts')
    .values({
      user_id: userId,
      status: row.status,
      customer_id: row.customerId ?? null,
      subscription_id: row.subscriptionId ?? null,
      trial_ends_at: row.trialEndsAt ?? null,
      state_at: row.stateAt ?? null,
    })
    .execute();
}

export async function billingRow(db: Db, userId: string) {
  return await db
    .selectFrom('billing_accounts')
    .selectAll()
    .where('user_id', '=', userId)
    .executeTakeFirstOrThrow();
}

/** The billing mails waiting in the job queue, oldest first. */
export async function queuedBillingMails(db: Db): Promise<Array<{ kind: string; userId: string }>> {
  const rows = await sql<{ payload: { kind: string; userId: string } }>`
    SELECT j.payload FROM graphile_worker._private_jobs j
    JOIN graphile_worker._private_tasks t ON t.id = j.task_id
    WHERE t.identifier = 'send_billing_mail' ORDER BY j.id`.execute(db);
  return rows.rows.map((r) => r.payload);
}
