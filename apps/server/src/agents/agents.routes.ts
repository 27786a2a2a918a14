// /api/agents. Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contextOf } from '../secrets/context.ts';
import { IdParams } from '../secrets/fields.ts';
import { ErrorResponse, ValidationErrorResponse } from '../secrets/responses.ts';
import { AgentBody, AgentListQuery, AgentView } from './agents.schema.ts';
import type { AgentsService } from './agents.service.ts';

const TAG = 'Agents';
const security = [{ bearer: [] }];

export function agentsRoutes(deps: { agents: AgentsService }): FastifyPluginAsync {
  const service = deps.agents;
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    app.get(
      '/api/agents',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'List agents (unpaginated, by name), with optional filters',
          security,
          querystring: AgentListQuery,
          response: { 200: z.object({ data: z.array(AgentView) }), 422: ValidationErrorResponse },
        },
      },
      async (request) => {
        const q = request.query;
        return {
          data: await service.list(contextOf(request), {
            ...(q.search ? { search: q.search } : {}),
            ...(q.runtime ? { runtime: q.runtime } : {}),
            ...(q.environment_id ? { environmentId: q.environment_id } : {}),
            ...(q.has_skills ? { hasSkills: q.has_skills === 'true' } : {}),
            ...(q.has_mcp ? { hasMcp: q.has_mcp === 'true' } : {}),
          }),
        };
      },
    );
    app.post(
      '/api/agents',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Create an agent',
          security,
          body: AgentBody,
          response: { 201: AgentView, 404: ErrorResponse, 409: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request, reply) => {
        reply.code(201);
        return await service.create(contextOf(request), request.body);
      },
    );
    app.get(
      '/api/agents/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Get an agent',
          security,
          params: IdParams,
          response: { 200: AgentView, 404: ErrorResponse },
        },
      },
      async (request) => await service.get(contextOf(request), request.params.id),
    );
    app.put(
      '/api/agents/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Replace every mutable field of an agent',
          security,
          params: IdParams,
          body: AgentBody,
          response: { 200: AgentView, 404: ErrorResponse, 409: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request) => await service.update(contextOf(request), request.params.id, request.body),
    );
    app.delete(
      '/api/agents/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: 'Delete an agent',
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
  };
}
