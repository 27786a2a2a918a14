// DELETE /api/account (the person's own account) and DELETE /api/admin/users/:id (an admin's
// deletion of another account, audited). Thin: schema → account-deletion.ts → reply.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../auth/auth.plugin.ts';
import type { Deps } from '../deps.ts';
import { Message, PasswordInput } from './accounts.schemas.ts';

export function accountDeletionRoutes(deps: Pick<Deps, 'accountDeletion' | 'sessions'>): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();

    app.delete(
      '/api/account',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: ['auth'],
          summary: 'Delete your account and everything in it (irreversible)',
          description:
            'Type the account email as confirm_email; a password account also sends its current password. Every sandbox is destroyed; every conversation, environment, vault, secret, agent, API key, session and inference credential is deleted, and the account data key with them. A deletion notice goes to a verified address.',
          body: z.strictObject({
            confirm_email: z.string().max(254),
            current_password: PasswordInput.optional(),
          }),
          response: { 200: Message },
        },
      },
      async (request, reply) => {
        await deps.accountDeletion.deleteOwn(
          principalOf(request),
          { confirmEmail: request.body.confirm_email, currentPassword: request.body.current_password },
          { ip: request.ip },
        );
        // The session row went with the account; the browser's cookie goes now.
        await deps.sessions.end(request, reply);
        return { message: 'Your account has been deleted.' };
      },
    );

    app.delete(
      '/api/admin/users/:id',
      {
        onRequest: [app.requireAdmin],
        schema: {
          tags: ['admin'],
          summary: 'Delete an account and everything in it (irreversible, audited)',
          description:
            "The same deletion as DELETE /api/account, without the confirmation: every sandbox destroyed, every row of the account deleted. Not for the admin's own account.",
          params: z.object({ id: z.string().max(64) }),
          response: { 200: Message },
        },
      },
      async (request) => {
        await deps.accountDeletion.deleteByAdmin(principalOf(request), request.params.id, { ip: request.ip });
        return { message: 'The account has been deleted.' };
      },
    );
  };
}
