// /api/environments and its secrets sub-resource. Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contextOf } from '../secrets/context.ts';
import { IdParams } from '../secrets/fields.ts';
import { ErrorResponse, ValidationErrorResponse } from '../secrets/responses.ts';
import { registerSecretRoutes } from '../secrets/secrets.routes.ts';
import { EnvironmentBody, EnvironmentView } from './environments.schema.ts';
import type { EnvironmentsService } from './environments.service.ts';

const TAG = 'Environments';
const security = [{ bearer: [] }];

export function environmentsRoutes(deps: { environments: EnvironmentsService }): FastifyPluginAsync {
  const service = deps.environments;
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    app.get(
      '/api/environments',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'List environments (unpaginated, by name)',
          security,
          response: { 200: z.object({ data: z.array(EnvironmentView) }) },
        },
      },
      async (request) => ({ data: await service.list(contextOf(request)) }),
    );
    app.post(
      '/api/environments',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Create an environment',
          security,
          body: EnvironmentBody,
          response: { 201: EnvironmentView, 409: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request, reply) => {
        reply.code(201);
        return await service.create(contextOf(request), request.body);
      },
    );
    app.get(
      '/api/environments/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Get an environment',
          security,
          params: IdParams,
          response: { 200: EnvironmentView, 404: ErrorResponse },
        },
      },
      async (request) => await service.get(contextOf(request), request.params.id),
    );
    app.put(
      '/api/environments/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Replace every mutable field of an environment',
          security,
          params: IdParams,
          body: EnvironmentBody,
          response: {
            200: EnvironmentView,
            404: ErrorResponse,
            409: ErrorResponse,
            422: ValidationErrorResponse,
          },
        },
      },
      async (request) => await service.update(contextOf(request), request.params.id, request.body),
    );
    app.delete(
      '/api/environments/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Delete an environment and its secrets (409 while agents use it)',
          security,
          params: IdParams,
          response: { 204: z.null().describe('deleted'), 404: ErrorResponse, 409: ErrorResponse },
        },
      },
      async (request, reply) => {
        await service.remove(contextOf(request), request.params.id);
        return reply.code(204).send(null);
      },
    );
    registerSecretRoutes(app, { prefix: '/api/environments', tag: TAG, owned: service.secrets });
  };
}
