// POST /api/apply: bulk apply of a compiled manifest. Always 200 for per-resource outcomes;
// 422 only when the body is not a list of {kind, name, spec}.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contextOf } from '../resources/context.ts';
import { ValidationErrorResponse } from '../resources/responses.ts';
import { APPLY_BODY_LIMIT, ApplyBody, ApplyResponse } from './apply.schema.ts';
import type { ApplyService } from './apply.service.ts';
import type { ExportService } from './export.service.ts';

const ManifestDocument = z.object({
  apiVersion: z.literal('paddock/v1'),
  kind: z.enum(['Environment', 'Vault', 'Agent']),
  metadata: z.object({ name: z.string() }),
  spec: z.record(z.string(), z.unknown()),
});

export function applyRoutes(deps: { apply: ApplyService; exporter: ExportService }): FastifyPluginAsync {
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
          querystring: z.object({
            dry_run: z
              .enum(['true', 'false'])
              .optional()
              .describe('true: report what an apply would do (same results) and change nothing'),
          }),
          body: ApplyBody,
          response: { 200: ApplyResponse, 422: ValidationErrorResponse },
        },
      },
      async (request) =>
        await deps.apply.apply(contextOf(request), request.body, {
          dryRun: request.query.dry_run === 'true',
        }),
    );

    app.get(
      '/api/apply/export',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: ['Apply'],
          summary:
            "The account's environments, vaults and agents as manifest documents; each secret as a placeholder naming its key, never its value",
          security: [{ bearer: [] }],
          response: {
            200: z.object({
              documents: z
                .array(ManifestDocument)
                .describe(
                  'environments, then vaults, then agents, each by name; the YAML file form of the CLI',
                ),
            }),
          },
        },
      },
      async (request) => await deps.exporter.export(contextOf(request)),
    );
  };
}
