// /api/agents. Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contextOf } from '../resources/context.ts';
import { registerNamedResourceRoutes } from '../resources/named-resource.routes.ts';
import { ErrorResponse, ValidationErrorResponse } from '../resources/responses.ts';
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
    registerNamedResourceRoutes(app, {
      path: '/api/agents',
      tag: TAG,
      body: AgentBody,
      // Inline skills (up to 256 KiB each) dominate: room for several; larger sets use
      // source skills (docs/api.md).
      bodyLimit: 2 * 1024 * 1024,
      view: AgentView,
      summaries: {
        create: 'Create an agent',
        get: 'Get an agent',
        update: 'Replace every mutable field of an agent',
        remove: 'Delete an agent',
      },
      // A referenced environment or vault that the tenant does not have.
      createErrors: { 404: ErrorResponse },
      service,
    });
  };
}
