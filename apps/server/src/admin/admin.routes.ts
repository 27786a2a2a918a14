// The admin's cross-tenant views (admin role required; every read audited, metadata only):
// GET /api/admin/users/:id, /api/admin/users/:id/conversations, /api/admin/conversations/:id;
// and the sandbox reaper's report, GET /api/admin/untracked-sandboxes (names only, no tenant's data).
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PageQuery } from '../accounts/accounts.schemas.ts';
import { principalOf } from '../auth/auth.plugin.ts';
import {
  AdminConversationDetail,
  AdminConversationPage,
  AdminUserDetail,
  UntrackedSandboxes,
} from './admin.schema.ts';
import type { AdminService } from './admin.service.ts';

const Id = z.object({ id: z.string().max(64) });

export function adminViewsRoutes(deps: { admin: AdminService }): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const tags = ['admin'];

    app.get(
      '/api/admin/users/:id',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: "One account's metadata and resource counts (the read is audited)",
          params: Id,
          response: { 200: AdminUserDetail },
        },
      },
      async (request) => await deps.admin.user(principalOf(request), request.params.id, { ip: request.ip }),
    );

    app.get(
      '/api/admin/users/:id/conversations',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: "An account's conversations, newest first: metadata only, never prompts or logs (audited)",
          params: Id,
          querystring: PageQuery,
          response: { 200: AdminConversationPage },
        },
      },
      async (request) => {
        const { limit, cursor } = request.query;
        return await deps.admin.conversations(
          principalOf(request),
          request.params.id,
          { limit, ...(cursor ? { cursor } : {}) },
          { ip: request.ip },
        );
      },
    );

    app.get(
      '/api/admin/conversations/:id',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary:
            "Any account's conversation: status, turns and usage; never prompts, logs or secrets (audited)",
          params: Id,
          response: { 200: AdminConversationDetail },
        },
      },
      async (request) =>
        await deps.admin.conversation(principalOf(request), request.params.id, { ip: request.ip }),
    );

    app.get(
      '/api/admin/untracked-sandboxes',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary:
            'Backend sandboxes no row knows, as the sandbox reaper last found them: reported, never destroyed',
          response: { 200: UntrackedSandboxes },
        },
      },
      async () => await deps.admin.untrackedSandboxes(),
    );
  };
}
