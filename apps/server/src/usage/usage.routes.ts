// The usage meter's endpoints: GET /api/account/usage (the account's own) and
// GET /api/admin/users/:id/usage (any account's, admin role, audited). Thin: schema → service →
// reply; the range rules and their 400s are usage.service.ts's.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../auth/auth.plugin.ts';
import { ErrorResponse, ValidationErrorResponse } from '../resources/responses.ts';
import { UsageQuery, UsageSummary } from './usage.schemas.ts';
import type { UsageService } from './usage.service.ts';

const DESCRIPTION =
  'Sums the usage events that ended in [from, to): sandbox lifetimes (busy while a turn ran, ' +
  'parked while ready and idle) and turns (tokens and cost as the runtime reported them). ' +
  'from and to are ISO 8601 dates or date-times (UTC unless an offset is given), from before to, ' +
  'at most 366 days apart. Without them, this month (UTC); with one, the month it falls in.';

export function usageRoutes(deps: { usage: UsageService }): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();

    app.get(
      '/api/account/usage',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: ['Usage'],
          summary: "The account's usage in a range: sandbox hours busy and parked, turns, tokens, cost",
          description: DESCRIPTION,
          querystring: UsageQuery,
          response: { 200: UsageSummary, 400: ValidationErrorResponse },
        },
      },
      async (request) => await deps.usage.mine(principalOf(request).tenantId, request.query),
    );

    app.get(
      '/api/admin/users/:id/usage',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags: ['admin'],
          summary: "One account's usage in a range (the read is audited)",
          description: DESCRIPTION,
          params: z.object({ id: z.string().max(64) }),
          querystring: UsageQuery,
          response: { 200: UsageSummary, 400: ValidationErrorResponse, 404: ErrorResponse },
        },
      },
      async (request) =>
        await deps.usage.ofAccount(principalOf(request), request.params.id, request.query, {
          ip: request.ip,
        }),
    );
  };
}
