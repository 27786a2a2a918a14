// /api/admin/users: list and search accounts, suspend and unsuspend, verify, promote, send a
// password reset link or set a temporary password (admin role required). The cross-tenant views of one account are in admin/admin.routes.ts.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../auth/auth.plugin.ts';
import type { Deps } from '../deps.ts';
import { Message, PageMeta, PageQuery, UserView } from './accounts.schemas.ts';

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
          querystring: PageQuery.extend({
            search: z.string().trim().max(254).optional().describe('case-insensitive substring of the email'),
          }),
          response: { 200: z.object({ data: z.array(UserView), meta: PageMeta }) },
        },
      },
      async (request) => {
        const { limit, cursor, search } = request.query;
        return await deps.accounts.listUsers(
          principalOf(request),
          { limit, ...(cursor ? { cursor } : {}), ...(search ? { search } : {}) },
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

    app.post(
      '/api/admin/users/:id/verify',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: "Mark an account's email address verified (as its confirmation link would)",
          params: z.object({ id: z.string().max(64) }),
          response: { 200: z.object({ user: UserView }) },
        },
      },
      async (request) => ({
        user: await deps.accounts.verifyByAdmin(principalOf(request), request.params.id, { ip: request.ip }),
      }),
    );

    app.post(
      '/api/admin/users/:id/promote',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: 'Grant an account the admin role',
          params: z.object({ id: z.string().max(64) }),
          response: { 200: z.object({ user: UserView }) },
        },
      },
      async (request) => ({
        user: await deps.accounts.promoteByAdmin(principalOf(request), request.params.id, { ip: request.ip }),
      }),
    );

    app.post(
      '/api/admin/users/:id/password-reset',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: 'Mail the account a password reset link (audited)',
          description:
            'The link is the one "Forgot password" sends (single use, one hour). 409 `mail_unavailable` where no mail can be made (EMAIL_DELIVERY=none outside development): set a temporary password instead.',
          params: z.object({ id: z.string().max(64) }),
          response: { 202: Message },
        },
      },
      async (request, reply) => {
        await deps.accounts.sendPasswordResetByAdmin(principalOf(request), request.params.id, {
          ip: request.ip,
        });
        reply.code(202);
        return { message: 'A password reset link is on its way to the account.' };
      },
    );

    app.post(
      '/api/admin/users/:id/temporary-password',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags,
          summary: 'Set a generated temporary password, shown once (audited)',
          description:
            "Every session of the account ends, pending reset and email-change links stop working, its API keys stay. Hand the password over; the person chooses their own on the Account page. Not for the admin's own account.",
          params: z.object({ id: z.string().max(64) }),
          response: { 200: z.object({ user: UserView, temporary_password: z.string() }) },
        },
      },
      async (request) => {
        const { user, temporaryPassword } = await deps.accounts.setTemporaryPasswordByAdmin(
          principalOf(request),
          request.params.id,
          { ip: request.ip },
        );
        // The response is not cached anywhere: the password exists only in this answer.
        return { user, temporary_password: temporaryPassword };
      },
    );
  };
}
