// /api/admin/users: list accounts, suspend and unsuspend (admin role required).
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../auth/auth.plugin.ts';
import type { Deps } from '../deps.ts';
import { PageMeta, PageQuery, UserView } from './accounts.schemas.ts';

export function adminRoutes(deps: Pick<Deps, 'accounts'>): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const tags = ['admin'];

    app.get(
      '/api/admin/users',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: 'All accounts, oldest first (the read is audited)',
          querystring: PageQuery,
          response: { 200: z.object({ data: z.array(UserView), meta: PageMeta }) },
        },
      },
      async (request) => {
        const { limit, cursor } = request.query;
        return await deps.accounts.listUsers(
          principalOf(request),
          { limit, ...(cursor ? { cursor } : {}) },
          { ip: request.ip },
        );
      },
    );

    for (const action of ['suspend', 'unsuspend'] as const) {
      app.post(
        `/api/admin/users/:id/${action}`,
        {
          onRequest: [app.requireAdmin],
          schema: {
            tags,
            summary:
              action === 'suspend'
                ? 'Suspend an account: its sessions end and it can no longer sign in or use its keys'
                : 'Lift a suspension',
            params: z.object({ id: z.string().max(64) }),
            response: { 200: z.object({ user: UserView }) },
          },
        },
        async (request) => ({
          user: await deps.accounts.setSuspended(
            principalOf(request),
            request.params.id,
            action === 'suspend',
            { ip: request.ip },
          ),
        }),
      );
    }
  };
}
