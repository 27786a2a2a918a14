// /api/account/exports: ask for a data export of the caller's account, follow it, download it
// (docs/data-export.md). Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contextOf } from '../resources/context.ts';
import { ErrorResponse } from '../resources/responses.ts';
import type { AccountExportsService } from './account-exports.service.ts';

const ExportView = z.object({
  id: z.string(),
  status: z
    .enum(['pending', 'building', 'ready', 'failed', 'expired'])
    .describe('pending and building: being made; ready: downloadable until expires_at'),
  size_bytes: z.number().nullable().describe('bytes of the gzipped download, once ready'),
  failure_reason: z.string().nullable(),
  created_at: z.string(),
  completed_at: z.string().nullable(),
  expires_at: z.string().nullable().describe('when the export is deleted (7 days after it is built)'),
  download_url: z.string().nullable(),
});

const IdParams = z.object({ id: z.string().max(200) });

export function accountExportsRoutes(deps: { accountExports: AccountExportsService }): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const tags = ['account'];
    const security = [{ bearer: [] }];
    const service = deps.accountExports;

    app.post(
      '/api/account/exports',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary:
            'Ask for an export of everything the account owns (built in the background; one at a time, 3 per 24 hours)',
          security,
          response: { 202: ExportView, 409: ErrorResponse, 429: ErrorResponse },
        },
      },
      async (request, reply) => {
        reply.code(202);
        return await service.request(contextOf(request));
      },
    );

    app.get(
      '/api/account/exports',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: "The account's recent exports, newest first",
          security,
          response: { 200: z.object({ data: z.array(ExportView) }) },
        },
      },
      async (request) => ({ data: await service.list(contextOf(request)) }),
    );

    app.get(
      '/api/account/exports/:id',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'One export: its status, size and expiry',
          security,
          params: IdParams,
          response: { 200: ExportView, 404: ErrorResponse },
        },
      },
      async (request) => await service.get(contextOf(request), request.params.id),
    );

    app.get(
      '/api/account/exports/:id/download',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'The export as gzipped JSON (application/gzip)',
          security,
          params: IdParams,
          response: {
            200: {
              description: 'The export document, gzipped JSON (docs/data-export.md)',
              content: { 'application/gzip': { schema: z.string() } },
            },
            404: ErrorResponse,
            409: ErrorResponse,
            410: ErrorResponse,
          },
        },
      },
      async (request, reply) => {
        const { view, body } = await service.download(contextOf(request), request.params.id);
        const day = view.created_at.slice(0, 10);
        // The 200 schema describes the download for the OpenAPI document; the body is a stream,
        // which Fastify pipes without serializing (the type provider cannot express that).
        return reply
          .type('application/gzip')
          .header('content-length', String(view.size_bytes ?? 0))
          .header('content-disposition', `attachment; filename="paddock-export-${day}.json.gz"`)
          .header('cache-control', 'no-store')
          .send(body as unknown as string);
      },
    );
  };
}
