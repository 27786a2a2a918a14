// The secrets sub-resource routes, mounted under /api/environments/:id and /api/vaults/:id.
// Write-only: responses carry key, id and timestamps, never a value.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contextOf } from '../resources/context.ts';
import { IdParams } from '../resources/fields.ts';
import { ErrorResponse, ValidationErrorResponse } from '../resources/responses.ts';
import type { OwnedSecrets } from './owned-secrets.ts';
import { SecretKeyParams, SecretUpsertBody, SecretView } from './secrets.schemas.ts';

export function registerSecretRoutes(
  root: FastifyInstance,
  options: { prefix: string; tag: string; owned: OwnedSecrets },
): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const { prefix, tag, owned } = options;
  app.get(
    `${prefix}/:id/secrets`,
    {
      onRequest: [app.requireAuth],
      schema: {
        tags: [tag],
        summary: 'List secret keys (never values)',
        security: [{ bearer: [] }],
        params: IdParams,
        response: { 200: z.object({ data: z.array(SecretView) }), 404: ErrorResponse },
      },
    },
    async (request) => ({ data: await owned.list(contextOf(request), request.params.id) }),
  );
  app.post(
    `${prefix}/:id/secrets`,
    {
      onRequest: [app.requireAuth],
      // One key and a value of at most 64 KiB, with room for JSON escapes (\n, \u0001).
      bodyLimit: 256 * 1024,
      schema: {
        tags: [tag],
        summary: 'Create or replace one secret (201 when created, 200 when replaced or unchanged)',
        security: [{ bearer: [] }],
        params: IdParams,
        body: SecretUpsertBody,
        response: {
          200: SecretView.extend({ outcome: z.enum(['created', 'updated', 'unchanged']) }),
          201: SecretView.extend({ outcome: z.enum(['created', 'updated', 'unchanged']) }),
          404: ErrorResponse,
          422: ValidationErrorResponse,
        },
      },
    },
    async (request, reply) => {
      const { key, value } = request.body;
      const { secret, outcome } = await owned.upsert(contextOf(request), request.params.id, key, value);
      reply.code(outcome === 'created' ? 201 : 200);
      return { ...secret, outcome };
    },
  );
  app.delete(
    `${prefix}/:id/secrets/:key`,
    {
      onRequest: [app.requireAuth],
      schema: {
        tags: [tag],
        summary: 'Delete one secret by key',
        security: [{ bearer: [] }],
        params: SecretKeyParams,
        response: { 204: z.null().describe('deleted'), 404: ErrorResponse },
      },
    },
    async (request, reply) => {
      await owned.remove(contextOf(request), request.params.id, request.params.key);
      return reply.code(204).send(null);
    },
  );
}
