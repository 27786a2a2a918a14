// Billing of one account: what its page shows (from local state only), checkout and the
// billing portal at the processor, cancel at period end, the trial clock at registration and
// the cancellation that precedes an account's deletion. What must hold
// (test/billing.checkout.test.ts, test/billing.off.test.ts, test/billing.deletion.test.ts):
// 1. Every URL handed to the processor is built here from PUBLIC_URL: success, cancel and
//    return URLs are never taken from the caller.
// 2. A comped account is never offered checkout (409 checkout_not_offered, and the view says
//    so); an account whose subscription of record is live (active, trialing or past_due at
//    the processor) is refused a second one (409 subscription_exists).
// 3. The view is read from billing_accounts only, so the page renders while the processor is
//    down; checkout and portal then fail with 503 billing_unavailable (stripe.ts).
// 4. Only wired with BILLING_ENABLED: off, no row is written and nothing here runs.
import type { AuditService } from '../audit/audit.service.ts';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import {
  type BillingAccountRow,
  findBillingAccount,
  insertTrial,
  setCancelAtPeriodEnd,
  setCustomerOnce,
} from './billing.repo.ts';
import type { SubscriptionStatus } from './billing.tables.ts';
import { billingPageUrl } from './gate.ts';
import type { BillingProcessor } from './stripe.ts';

/** The processor statuses in which a subscription still bills or will: a second checkout is refused. */
const LIVE_AT_PROCESSOR = new Set(['active', 'trialing', 'past_due', 'unpaid', 'incomplete']);
/** The processor wants a trial end at least 48 hours ahead; a shorter remaining trial is not carried over. */
const MIN_PROCESSOR_TRIAL_MS = 49 * 3600_000;

export interface BillingView {
  /** null: the account predates billing on this instance and has no trial clock yet (legacy). */
  status: SubscriptionStatus | null;
  legacy: boolean;
  trial_ends_at: string | null;
  current_period_end: string | null;
  cancel_at_period_end: boolean;
  has_subscription: boolean;
  checkout_available: boolean;
  portal_available: boolean;
  price_monthly_cents: number | null;
}

/** The billing fields of GET /api/auth/me (billing on only). */
export interface MeBilling {
  subscription_status: SubscriptionStatus | null;
  trial_ends_at: string | null;
  current_period_end: string | null;
  cancel_at_period_end: boolean;
}

export interface BillingService {
  view(userId: string): Promise<BillingView>;
  me(userId: string): Promise<MeBilling>;
  checkout(account: { userId: string; email: string }, ctx: { ip: string | null }): Promise<{ url: string }>;
  portal(userId: string): Promise<{ url: string }>;
  setCancelAtPeriodEnd(
    userId: string,
    cancelAtPeriodEnd: boolean,
    ctx: { ip: string | null },
  ): Promise<BillingView>;
  /** The trial clock of a new account, inside its registration transaction. */
  startTrial(db: Db, userId: string): Promise<void>;
  /** Before an account's deletion: its subscription canceled at the processor; a throw stops the deletion. */
  cancelForDeletion(userId: string): Promise<void>;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function createBillingService(deps: {
  db: Db;
  config: Pick<Config, 'billing' | 'publicUrl'>;
  processor: BillingProcessor;
  audit: AuditService;
}): BillingService {
  const { db, config, processor, audit } = deps;
  const page = billingPageUrl(config.publicUrl);
  const returnUrl = (outcome: string) => {
    const u = new URL(page);
    u.searchParams.set('checkout', outcome);
    return u.toString();
  };

  const toView = (row: BillingAccountRow | undefined): BillingView => {
    const status = row?.status ?? null;
    return {
      status,
      legacy: row ? row.legacy : true,
      trial_ends_at: iso(row?.trial_ends_at ?? null),
      current_period_end: iso(row?.current_period_end ?? null),
      cancel_at_period_end: row?.cancel_at_period_end ?? false,
      has_subscription: Boolean(row?.subscription_id),
      // A subscription of record that is not canceled is managed in the portal, not bought again.
      checkout_available: status !== 'comped' && !(row?.subscription_id && status !== 'canceled'),
      portal_available: Boolean(row?.customer_id),
      price_monthly_cents: config.billing.priceMonthlyCents,
    };
  };

  /** The row checkout and portal work on: an account that predates billing gets one now (legacy). */
  const ensureRow = async (userId: string): Promise<BillingAccountRow> => {
    const found = await findBillingAccount(db, userId);
    if (found) return found;
    await db
      .insertInto('billing_accounts')
      .values({ user_id: userId, status: 'trialing', legacy: true })
      .onConflict((oc) => oc.column('user_id').doNothing())
      .execute();
    const row = await findBillingAccount(db, userId);
    if (!row) throw AppError.notFound('account');
    return row;
  };

  return {
    async view(userId) {
      return toView(await findBillingAccount(db, userId));
    },

    async me(userId) {
      const row = await findBillingAccount(db, userId);
      return {
        subscription_status: row?.status ?? null,
        trial_ends_at: iso(row?.trial_ends_at ?? null),
        current_period_end: iso(row?.current_period_end ?? null),
        cancel_at_period_end: row?.cancel_at_period_end ?? false,
      };
    },

    async checkout(account, ctx) {
      const row = await ensureRow(account.userId);
      if (row.status === 'comped')
        throw new AppError('checkout_not_offered', 'this account is comped: it needs no subscription');
      if (row.subscription_id) {
        // The local row may lag the processor (a webhook not yet arrived): ask it.
        const live = await processor.retrieveSubscription(row.subscription_id);
        if (live && LIVE_AT_PROCESSOR.has(live.status))
          throw new AppError(
            'subscription_exists',
            'this account already has a subscription; manage it in the billing portal',
          );
      }
      if (!config.billing.stripePriceId && config.billing.priceMonthlyCents === null)
        throw new AppError(
          'billing_not_configured',
          'no price is configured on this instance (BILLING_STRIPE_PRICE_ID or BILLING_PRICE_MONTHLY_CENTS); ask its operator',
        );
      const customerId =
        row.customer_id ??
        (await setCustomerOnce(
          db,
          account.userId,
          await processor.createCustomer({ userId: account.userId, email: account.email }),
        ));
      const trialEnd =
        row.status === 'trialing' &&
        row.trial_ends_at &&
        row.trial_ends_at.getTime() - Date.now() > MIN_PROCESSOR_TRIAL_MS
          ? row.trial_ends_at
          : null;
      const url = await processor.createCheckoutSession({
        userId: account.userId,
        customerId,
        successUrl: returnUrl('success'),
        cancelUrl: returnUrl('canceled'),
        priceId: config.billing.stripePriceId ?? null,
        priceMonthlyCents: config.billing.priceMonthlyCents,
        trialEnd,
      });
      await audit.record({
        type: 'billing.checkout_started',
        tenantId: account.userId,
        actor: { kind: 'user', userId: account.userId, apiKeyId: null },
        ip: ctx.ip,
        metadata: { customer_id: customerId },
      });
      return { url };
    },

    async portal(userId) {
      const row = await findBillingAccount(db, userId);
      if (!row?.customer_id)
        throw new AppError(
          'no_billing_customer',
          'this account has no billing record at the payment processor yet; subscribe first',
        );
      return { url: await processor.createPortalSession({ customerId: row.customer_id, returnUrl: page }) };
    },

    async setCancelAtPeriodEnd(userId, cancelAtPeriodEnd, ctx) {
      const row = await findBillingAccount(db, userId);
      if (!row?.subscription_id || row.status === 'canceled')
        throw new AppError('conflict', 'this account has no subscription to change');
      const sub = await processor.setCancelAtPeriodEnd(row.subscription_id, cancelAtPeriodEnd);
      await setCancelAtPeriodEnd(db, userId, row.subscription_id, {
        cancelAtPeriodEnd: sub.cancelAtPeriodEnd,
        currentPeriodEnd: sub.currentPeriodEnd,
      });
      await audit.record({
        type: 'billing.cancel_at_period_end_set',
        tenantId: userId,
        actor: { kind: 'user', userId, apiKeyId: null },
        ip: ctx.ip,
        metadata: { subscription_id: row.subscription_id, cancel_at_period_end: sub.cancelAtPeriodEnd },
      });
      return toView(await findBillingAccount(db, userId));
    },

    async startTrial(trx, userId) {
      await insertTrial(trx, userId, config.billing.trialDays);
    },

    async cancelForDeletion(userId) {
      const row = await findBillingAccount(db, userId);
      if (!row?.subscription_id) return;
      await processor.cancelSubscription(row.subscription_id);
    },
  };
}
