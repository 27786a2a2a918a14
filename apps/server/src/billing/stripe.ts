// The payment processor, through the official `stripe` SDK (pinned), and nothing else of it:
// the few calls billing makes, each answering in Paddock's terms. What must hold
// (test/billing.checkout.test.ts against test/helpers/fake-stripe.ts, the SDK unchanged):
// 1. The SDK reaches BILLING_STRIPE_API_BASE when it is set (host, port, protocol), Stripe's API
//    otherwise; nothing else of the SDK is replaced.
// 2. A processor that cannot be reached, or answers 5xx, 401 or 429, is 503 billing_unavailable
//    with a message a person can act on ("try again"), never a 500; the key, the request and the
//    processor's own message are never in the answer or a log line (only the error's type).
// 3. Without BILLING_STRIPE_SECRET_KEY (development) every call is 503 billing_not_configured,
//    visibly, and nothing else of billing breaks: the page renders from local state.
// 4. Calls that create something carry an idempotency key derived from what they are for, so a
//    retry (the SDK's, or a double click) makes one customer.
import Stripe from 'stripe';
import type { Config } from '../config/config.ts';
import { AppError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';

/** A subscription as billing reads it. */
export interface ProcessorSubscription {
  id: string;
  /** Stripe's status (active, trialing, past_due, canceled, unpaid, incomplete, …). */
  status: string;
  cancelAtPeriodEnd: boolean;
  currentPeriodEnd: Date | null;
}

export interface CheckoutInput {
  userId: string;
  customerId: string;
  successUrl: string;
  cancelUrl: string;
  /** The recurring price to sell; null: price_data from priceMonthlyCents. */
  priceId: string | null;
  priceMonthlyCents: number | null;
  /** The local trial's end when it is far enough ahead for the processor (48 h); else none. */
  trialEnd: Date | null;
}

export interface BillingProcessor {
  createCustomer(input: { userId: string; email: string }): Promise<string>;
  /** The hosted checkout page's URL. */
  createCheckoutSession(input: CheckoutInput): Promise<string>;
  /** The hosted billing portal's URL. */
  createPortalSession(input: { customerId: string; returnUrl: string }): Promise<string>;
  /** Null when the processor does not know the subscription. */
  retrieveSubscription(id: string): Promise<ProcessorSubscription | null>;
  /** Cancels now; a subscription already gone or canceled is fine. */
  cancelSubscription(id: string): Promise<void>;
  setCancelAtPeriodEnd(id: string, cancelAtPeriodEnd: boolean): Promise<ProcessorSubscription>;
}

/** How long one processor call may take, and how often the SDK retries a transient failure. */
const TIMEOUT_MS = 10_000;
const NETWORK_RETRIES = 1;

function toSubscription(s: Stripe.Subscription): ProcessorSubscription {
  // Since API version 2025-03-31 the period lives on the items; earlier ones kept it on the
  // subscription. The latest end of any item is the subscription's.
  const itemEnds = s.items.data.map((i) => i.current_period_end).filter((n) => typeof n === 'number');
  const legacyEnd = (s as unknown as { current_period_end?: number }).current_period_end;
  const end = itemEnds.length > 0 ? Math.max(...itemEnds) : legacyEnd;
  return {
    id: s.id,
    status: s.status,
    cancelAtPeriodEnd: s.cancel_at_period_end,
    currentPeriodEnd: typeof end === 'number' ? new Date(end * 1000) : null,
  };
}

const isMissing = (err: unknown) =>
  err instanceof Stripe.errors.StripeInvalidRequestError && err.code === 'resource_missing';

export function createStripeProcessor(
  config: Pick<Config, 'billing'>,
  logger: Pick<Logger, 'warn'>,
): BillingProcessor {
  const { stripeSecretKey, stripeApiBase } = config.billing;
  const client = stripeSecretKey
    ? new Stripe(stripeSecretKey, {
        maxNetworkRetries: NETWORK_RETRIES,
        timeout: TIMEOUT_MS,
        telemetry: false,
        ...(stripeApiBase
          ? {
              host: stripeApiBase.hostname.replace(/^\[|\]$/g, ''),
              protocol: stripeApiBase.protocol === 'http:' ? 'http' : 'https',
              port: stripeApiBase.port || (stripeApiBase.protocol === 'http:' ? 80 : 443),
            }
          : {}),
      })
    : null;

  const stripe = (): Stripe => {
    if (!client)
      throw new AppError(
        'billing_not_configured',
        'payments are not configured on this instance (BILLING_STRIPE_SECRET_KEY is unset); ask its operator',
      );
    return client;
  };

  /** Every call: the processor's refusals and outages in Paddock's terms (invariant 2). */
  const call = async <T>(what: string, work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (err) {
      if (err instanceof AppError) throw err;
      const type = err instanceof Stripe.errors.StripeError ? err.type : 'unknown';
      const status = err instanceof Stripe.errors.StripeError ? err.statusCode : undefined;
      logger.warn(
        { processor_call: what, error_type: type, status },
        'the payment processor refused or failed',
      );
      throw new AppError(
        'billing_unavailable',
        'the payment processor could not be reached or refused the request; try again in a few minutes',
      );
    }
  };

  return {
    createCustomer: ({ userId, email }) =>
      call('customer.create', async () => {
        const customer = await stripe().customers.create(
          { email, metadata: { paddock_user_id: userId } },
          { idempotencyKey: `paddock-customer-${userId}` },
        );
        return customer.id;
      }),

    createCheckoutSession: (input) =>
      call('checkout.session.create', async () => {
        const lineItem: Stripe.Checkout.SessionCreateParams.LineItem = input.priceId
          ? { price: input.priceId, quantity: 1 }
          : {
              quantity: 1,
              price_data: {
                currency: 'usd',
                unit_amount: input.priceMonthlyCents ?? 0,
                recurring: { interval: 'month' },
                product_data: { name: 'Paddock' },
              },
            };
        const session = await stripe().checkout.sessions.create({
          mode: 'subscription',
          customer: input.customerId,
          client_reference_id: input.userId,
          line_items: [lineItem],
          success_url: input.successUrl,
          cancel_url: input.cancelUrl,
          metadata: { paddock_user_id: input.userId },
          subscription_data: {
            metadata: { paddock_user_id: input.userId },
            ...(input.trialEnd ? { trial_end: Math.floor(input.trialEnd.getTime() / 1000) } : {}),
          },
        });
        if (!session.url) throw new Error('checkout session without a url');
        return session.url;
      }),

    createPortalSession: ({ customerId, returnUrl }) =>
      call('billing_portal.session.create', async () => {
        const session = await stripe().billingPortal.sessions.create({
          customer: customerId,
          return_url: returnUrl,
        });
        return session.url;
      }),

    retrieveSubscription: (id) =>
      call('subscription.retrieve', async () => {
        try {
          return toSubscription(await stripe().subscriptions.retrieve(id));
        } catch (err) {
          if (isMissing(err)) return null;
          throw err;
        }
      }),

    cancelSubscription: (id) =>
      call('subscription.cancel', async () => {
        try {
          const s = await stripe().subscriptions.retrieve(id);
          if (s.status === 'canceled' || s.status === 'incomplete_expired') return;
          await stripe().subscriptions.cancel(id);
        } catch (err) {
          if (isMissing(err)) return;
          throw err;
        }
      }),

    setCancelAtPeriodEnd: (id, cancelAtPeriodEnd) =>
      call('subscription.update', async () =>
        toSubscription(await stripe().subscriptions.update(id, { cancel_at_period_end: cancelAtPeriodEnd })),
      ),
  };
}
