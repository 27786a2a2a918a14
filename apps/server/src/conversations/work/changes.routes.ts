// GET /api/conversations/:id/changes and GET /api/conversations/:id/turns/:turn_id/changes
// (docs/api.md "Changes"). Thin: schema → changes.ts → reply. The owner's routes only: they do
// not opt in to conversation scope, so a sandbox key (PADDOCK_TOKEN) is refused with 403.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../../auth/auth.plugin.ts';
import { AppError } from '../../http/errors.ts';
import { ErrorResponse, ValidationErrorResponse } from '../../resources/responses.ts';
import type { ChangesService } from './changes.ts';

const TAG = 'Conversations';
const security = [{ bearer: [] }];

const ChangedFileView = z.object({
  path: z.string(),
  old_path: z.string().nullable(),
  status: z.enum(['added', 'modified', 'deleted', 'renamed', 'type_changed']),
  additions: z.number().int(),
  deletions: z.number().int(),
  binary: z.boolean(),
  committed: z.boolean(),
  patch: z.string().nullable().optional(),
  patch_omitted: z.enum(['binary', 'too_large']).nullable().optional(),
});

const RepositoryView = z.object({
  dir: z.string(),
  origin: z.enum(['cloned', 'created']),
  url: z.string().nullable(),
  base: z.string(),
  head: z.string().nullable(),
  files: z.array(ChangedFileView),
  additions: z.number().int(),
  deletions: z.number().int(),
  truncated_files: z.number().int(),
  missing: z.boolean(),
});

const ChangesView = z.object({ repositories: z.array(RepositoryView) });
const FileChangesView = z.object({ repository: RepositoryView, file: ChangedFileView });
const TurnChangesView = z.object({
  turn_id: z.string(),
  seq: z.number().int(),
  status: z.enum(['recording', 'recorded', 'failed', 'not_recorded']),
  error: z.string().nullable(),
  recorded_at: z.string().nullable(),
  repositories: z.array(RepositoryView),
});

const ChangesQuery = z.object({
  repo: z.string().min(1).max(4096).optional(),
  file: z.string().min(1).max(4096).optional(),
});

export function changesRoutes(deps: { changes: ChangesService }): FastifyPluginAsync {
  const service = deps.changes;
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();

    app.get(
      '/api/conversations/:id/changes',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary:
            "The agent's changes in the live sandbox against each repository's base (per repository: files with stats); with repo and file, that file's redacted unified diff",
          security,
          params: z.object({ id: z.string().max(200) }),
          querystring: ChangesQuery,
          response: {
            200: z.union([ChangesView, FileChangesView]),
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            422: ValidationErrorResponse,
          },
        },
      },
      async (request) => {
        const tenantId = principalOf(request).tenantId;
        const { repo, file } = request.query;
        if (file !== undefined) {
          if (repo === undefined) {
            const all = await service.current(tenantId, request.params.id);
            const only = all.length === 1 ? all[0]?.dir : undefined;
            if (only === undefined)
              throw new AppError('validation_failed', 'name the repository of the file with ?repo=', {
                extra: { errors: { repo: ['required with file when the sandbox has several repositories'] } },
              });
            return await service.file(tenantId, request.params.id, only, file);
          }
          return await service.file(tenantId, request.params.id, repo, file);
        }
        return { repositories: await service.current(tenantId, request.params.id, repo) };
      },
    );

    app.get(
      '/api/conversations/:id/turns/:turn_id/changes',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary:
            'What one turn changed, as recorded after it (stats and bounded, redacted diffs; kept after the sandbox is reclaimed)',
          security,
          params: z.object({ id: z.string().max(200), turn_id: z.string().max(200) }),
          response: { 200: TurnChangesView, 403: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (request) =>
        await service.turn(principalOf(request).tenantId, request.params.id, request.params.turn_id),
    );
  };
}
