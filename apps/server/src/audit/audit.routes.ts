// GET /api/audit: the caller's own audit events. GET /api/admin/audit: any tenant's
// events for an admin; that cross-tenant read is itself audited (admin.audit.read).
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PageMeta, PageQuery } from '../accounts/accounts.schemas.ts';
import { principalOf } from '../auth/auth.plugin.ts';
import type { Deps } from '../deps.ts';
import { auditActorFrom } from './audit.service.ts';

const AuditEvent = z.object({
  id: z.uuid(),
  type: z.string(),
  tenant_id: z.string().nullable(),
  actor: z.object({
    kind: z.enum(['user', 'api_key', 'system']),
    user_id: z.string().nullable(),
    api_key_id: z.string().nullable(),
  }),
  ip: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()),
  created_at: z.string(),
});
const AuditPage = z.object({ data: z.array(AuditEvent), meta: PageMeta });

export function auditRoutes(deps: Pick<Deps, 'audit'>): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();

    app.get(
      '/api/audit',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: ['audit'],
          summary: 'Your audit events, newest first',
          querystring: PageQuery,
          response: { 200: AuditPage },
        },
      },
      async (request) => {
        const { limit, cursor } = request.query;
        return await deps.audit.list(principalOf(request).tenantId, { limit, ...(cursor ? { cursor } : {}) });
      },
    );

    app.get(
      '/api/admin/audit',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags: ['admin'],
          summary: "Any account's audit events (admin; the read is itself audited)",
          querystring: PageQuery.extend({ tenant_id: z.uuid() }),
          response: { 200: AuditPage },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const { limit, cursor, tenant_id } = request.query;
        const page = await deps.audit.list(tenant_id, { limit, ...(cursor ? { cursor } : {}) });
        await deps.audit.record({
          type: 'admin.audit.read',
          tenantId: principal.tenantId,
          actor: auditActorFrom(principal),
          ip: request.ip,
          metadata: { target_tenant_id: tenant_id, count: page.data.length },
        });
        return page;
      },
    );
  };
}
