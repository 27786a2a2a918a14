// /api/billing: the account's billing (read from local state), checkout, the billing portal and
// cancel at period end. Registered only with BILLING_ENABLED (http/routes.ts): off, none of
// these paths exists (test/billing.off.test.ts). Thin: schema → service → reply. No request
// body names a URL: every URL the processor gets is built by the service from PUBLIC_URL.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../auth/auth.plugin.ts';
import type { Deps } from '../deps.ts';
import type { BillingService } from './billing.service.ts';

const Status = z.enum(['trialing', 'active', 'past_due', 'canceled', 'comped']);

export const BillingView = z.object({
  status: Status.nullable().describe('null: the account predates billing here and has no trial clock yet'),
  legacy: z.boolean().describe('the account predates billing on this instance'),
  trial_ends_at: z.string().nullable(),
  current_period_end: z.string().nullable(),
  cancel_at_period_end: z.boolean(),
  has_subscription: z.boolean(),
  checkout_available: z.boolean().describe('false for a comped account and a live subscription'),
  portal_available: z.boolean().describe('the account has a customer at the payment processor'),
  price_monthly_cents: z.number().int().nullable(),
});

const Redirect = z.object({ url: z.string().describe("the processor's hosted page to send the browser to") });

export function billingRoutes(
  deps: Pick<Deps, 'accounts'> & { billing: BillingService },
): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const { billing } = deps;
    const tags = ['billing'];

    app.get(
      '/api/billing',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: "The account's subscription, from local state",
          response: { 200: BillingView },
        },
      },
      async (request) => await billing.view(principalOf(request).tenantId),
    );

    app.post(
      '/api/billing/checkout',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary:
            'Start a Stripe Checkout for the subscription; 409 for a comped account or a live subscription',
          response: { 200: Redirect },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const me = await deps.accounts.me(principal);
        return await billing.checkout({ userId: principal.tenantId, email: me.email }, { ip: request.ip });
      },
    );

    app.post(
      '/api/billing/portal',
      {
        onRequest: [app.requireAuth],
        schema: { tags, summary: "Open the processor's billing portal", response: { 200: Redirect } },
      },
      async (request) => await billing.portal(principalOf(request).tenantId),
    );

    app.post(
      '/api/billing/cancel-at-period-end',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'Cancel the subscription at the end of the period (true) or keep it (false)',
          body: z.object({ cancel_at_period_end: z.boolean() }).strict(),
          response: { 200: BillingView },
        },
      },
      async (request) =>
        await billing.setCancelAtPeriodEnd(principalOf(request).tenantId, request.body.cancel_at_period_end, {
          ip: request.ip,
        }),
    );
  };
}
