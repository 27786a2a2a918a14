// /api/auth/api-keys: create (plaintext shown once), list, revoke.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiKeyView, CreatedApiKey, ExpiresInDays, KeyName } from '../accounts/accounts.schemas.ts';
import { auditActorFrom } from '../audit/audit.service.ts';
import type { Deps } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { principalOf } from './auth.plugin.ts';

export function apiKeysRoutes(deps: Pick<Deps, 'apiKeys'>): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const tags = ['auth'];

    app.get(
      '/api/auth/api-keys',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'List your API keys (metadata only; revoked keys are not listed)',
          response: { 200: z.object({ data: z.array(ApiKeyView) }) },
        },
      },
      async (request) => ({ data: await deps.apiKeys.list(principalOf(request).userId) }),
    );

    app.post(
      '/api/auth/api-keys',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'Create an API key; the plaintext `key` is returned only in this response',
          body: z.strictObject({ name: KeyName, expires_in_days: ExpiresInDays }),
          response: { 201: CreatedApiKey },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const key = await deps.apiKeys.create(
          principal.userId,
          { name: request.body.name, expiresInDays: request.body.expires_in_days ?? null },
          { actor: auditActorFrom(principal), ip: request.ip, via: 'api' },
        );
        reply.code(201);
        return key;
      },
    );

    app.delete(
      '/api/auth/api-keys/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'Revoke an API key',
          params: z.object({ id: z.string().max(64) }),
          response: { 200: z.object({ id: z.string(), revoked: z.literal(true) }) },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        if (!z.uuid().safeParse(request.params.id).success) throw AppError.notFound('API key');
        await deps.apiKeys.revoke(principal.userId, request.params.id, {
          actor: auditActorFrom(principal),
          ip: request.ip,
        });
        return { id: request.params.id, revoked: true as const };
      },
    );
  };
}
