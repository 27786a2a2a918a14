// The admin's billing views (admin role; registered only with BILLING_ENABLED):
// GET /api/admin/billing: accounts per subscription status and the monthly revenue figure
// (active subscriptions × BILLING_PRICE_MONTHLY_CENTS; null when the price is unset; comped
// and trialing accounts pay nothing, past_due ones are not collected).
// GET /api/admin/billing/failures: the processor events whose apply failed and that no
// redelivery has applied since, newest first (event id, type, account, error, attempts).
// Every read is audited (admin.billing.read), like the admin's other views.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { sql } from 'kysely';
import { z } from 'zod';
import { type AuditService, auditActorFrom } from '../audit/audit.service.ts';
import { principalOf } from '../auth/auth.plugin.ts';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';

const FAILURES_SHOWN = 100;

const STATUSES = ['trialing', 'active', 'past_due', 'canceled', 'comped'] as const;

const BillingSummary = z.object({
  price_monthly_cents: z.number().int().nullable().describe('BILLING_PRICE_MONTHLY_CENTS; null when unset'),
  active_subscriptions: z.number().int(),
  revenue_monthly_cents: z
    .number()
    .int()
    .nullable()
    .describe('active_subscriptions × price_monthly_cents; null when the price is unset'),
  accounts_by_status: z.object(
    Object.fromEntries(STATUSES.map((s) => [s, z.number().int()])) as Record<
      (typeof STATUSES)[number],
      z.ZodNumber
    >,
  ),
  failed_events: z.number().int().describe('Events whose apply failed and that no redelivery has applied'),
});

const BillingFailures = z.object({
  data: z.array(
    z.object({
      id: z.string().describe("The processor's event id"),
      type: z.string(),
      user_id: z.string().nullable(),
      subscription_id: z.string().nullable(),
      created_at: z.iso.datetime().describe("The event's own time at the processor"),
      received_at: z.iso.datetime(),
      attempts: z.number().int(),
      error: z.string().nullable(),
    }),
  ),
});

export function billingAdminRoutes(deps: {
  db: Db;
  config: Config;
  audit: Pick<AuditService, 'record'>;
}): FastifyPluginAsync {
  const audited = async (request: FastifyRequest, view: 'summary' | 'failures', count?: number) => {
    const admin = principalOf(request);
    await deps.audit.record({
      type: 'admin.billing.read',
      tenantId: admin.tenantId,
      actor: auditActorFrom(admin),
      ip: request.ip,
      metadata: { view, ...(count === undefined ? {} : { count }) },
    });
  };
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const tags = ['admin'];

    app.get(
      '/api/admin/billing',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary:
            'Accounts per subscription status, the monthly revenue figure and the failed webhook count',
          response: { 200: BillingSummary },
        },
      },
      async (request) => {
        const rows = await deps.db
          .selectFrom('billing_accounts')
          .select(['status', sql<string>`count(*)`.as('n')])
          .groupBy('status')
          .execute();
        const byStatus = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<
          (typeof STATUSES)[number],
          number
        >;
        for (const r of rows) byStatus[r.status] = Number(r.n);
        const failed = await deps.db
          .selectFrom('billing_events')
          .select(sql<string>`count(*)`.as('n'))
          .where('outcome', '=', 'failed')
          .executeTakeFirstOrThrow();
        const price = deps.config.billing.priceMonthlyCents;
        await audited(request, 'summary');
        return {
          price_monthly_cents: price,
          active_subscriptions: byStatus.active,
          revenue_monthly_cents: price === null ? null : byStatus.active * price,
          accounts_by_status: byStatus,
          failed_events: Number(failed.n),
        };
      },
    );

    app.get(
      '/api/admin/billing/failures',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: `Processor events whose apply failed, newest first (at most ${FAILURES_SHOWN})`,
          response: { 200: BillingFailures },
        },
      },
      async (request) => {
        const rows = await deps.db
          .selectFrom('billing_events')
          .select([
            'id',
            'type',
            'user_id',
            'subscription_id',
            'created_at',
            'received_at',
            'attempts',
            'error',
          ])
          .where('outcome', '=', 'failed')
          .orderBy('received_at', 'desc')
          .limit(FAILURES_SHOWN)
          .execute();
        await audited(request, 'failures', rows.length);
        return {
          data: rows.map((r) => ({
            ...r,
            created_at: r.created_at.toISOString(),
            received_at: r.received_at.toISOString(),
          })),
        };
      },
    );
  };
}
