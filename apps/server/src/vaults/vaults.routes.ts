// /api/vaults and its secrets sub-resource. Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contextOf } from '../secrets/context.ts';
import { IdParams } from '../secrets/fields.ts';
import { ErrorResponse, ValidationErrorResponse } from '../secrets/responses.ts';
import { registerSecretRoutes } from '../secrets/secrets.routes.ts';
import { VaultBody, VaultView } from './vaults.schema.ts';
import type { VaultsService } from './vaults.service.ts';

const TAG = 'Vaults';
const security = [{ bearer: [] }];

export function vaultsRoutes(deps: { vaults: VaultsService }): FastifyPluginAsync {
  const service = deps.vaults;
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    app.get(
      '/api/vaults',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'List vaults (unpaginated, by name)',
          security,
          response: { 200: z.object({ data: z.array(VaultView) }) },
        },
      },
      async (request) => ({ data: await service.list(contextOf(request)) }),
    );
    app.post(
      '/api/vaults',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Create a vault',
          security,
          body: VaultBody,
          response: { 201: VaultView, 409: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request, reply) => {
        reply.code(201);
        return await service.create(contextOf(request), request.body);
      },
    );
    app.get(
      '/api/vaults/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Get a vault',
          security,
          params: IdParams,
          response: { 200: VaultView, 404: ErrorResponse },
        },
      },
      async (request) => await service.get(contextOf(request), request.params.id),
    );
    app.put(
      '/api/vaults/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Replace every mutable field of a vault',
          security,
          params: IdParams,
          body: VaultBody,
          response: { 200: VaultView, 404: ErrorResponse, 409: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request) => await service.update(contextOf(request), request.params.id, request.body),
    );
    app.delete(
      '/api/vaults/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Delete a vault, its secrets and its place on agent allowlists',
          security,
          params: IdParams,
          response: { 204: z.null().describe('deleted'), 404: ErrorResponse },
        },
      },
      async (request, reply) => {
        await service.remove(contextOf(request), request.params.id);
        return reply.code(204).send(null);
      },
    );
    registerSecretRoutes(app, { prefix: '/api/vaults', tag: TAG, owned: service.secrets });
  };
}
