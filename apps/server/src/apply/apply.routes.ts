// POST /api/apply: bulk apply of a compiled manifest. Always 200 for per-resource outcomes;
// 422 only when the body is not a list of {kind, name, spec}.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { contextOf } from '../secrets/context.ts';
import { ValidationErrorResponse } from '../secrets/responses.ts';
import { APPLY_BODY_LIMIT, ApplyBody, ApplyResponse } from './apply.schema.ts';
import type { ApplyService } from './apply.service.ts';

export function applyRoutes(deps: { apply: ApplyService }): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    app.post(
      '/api/apply',
      {
        onRequest: [app.requireAuth],
        // A whole manifest: up to 500 resources; larger ones are split by the client.
        bodyLimit: APPLY_BODY_LIMIT,
        schema: {
          tags: ['Apply'],
          summary: 'Upsert environments, then vaults, then agents by name (best-effort per resource)',
          security: [{ bearer: [] }],
          body: ApplyBody,
          response: { 200: ApplyResponse, 422: ValidationErrorResponse },
        },
      },
      async (request) => await deps.apply.apply(contextOf(request), request.body),
    );
  };
}
