// GET /api/conversations/:id/files (a directory listing) and GET …/files/content (a file, or a
// directory as a tarball): the sandbox's files, read-only, while it lives. Thin: the rules are
// in files.ts and files-access.ts.
//
// Who may read: the conversation's tenant with a full credential (session or API key). A
// sandbox key (PADDOCK_TOKEN) is refused with 403 by requireAuth (no allowConversationScope):
// an agent reads its own files in its sandbox already, and its key must not reach past it.
import { PassThrough, pipeline } from 'node:stream';
import { createGzip } from 'node:zlib';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../../auth/auth.plugin.ts';
import { AppError } from '../../http/errors.ts';
import { ErrorResponse, ValidationErrorResponse } from '../../resources/responses.ts';
import {
  ARCHIVE_MAX_BYTES,
  DOWNLOAD_MAX_BYTES,
  INLINE_MAX_BYTES,
  listDirectory,
  normalizePath,
  type OpenedRead,
  openRead,
} from './files.ts';
import { liveSandboxOf, type WorkAccessDeps, workRedactor } from './files-access.ts';
import { redactTar } from './files-tar.ts';

const TAG = 'Conversations';
const security = [{ bearer: [] }];
const Params = z.object({ id: z.string().max(200) });
const PathParam = z
  .string()
  .max(4096)
  .optional()
  .describe('Relative to the sandbox home /home/sandbox (default: the home itself); no `..`');

const Entry = z.object({
  name: z.string(),
  path: z.string().describe('Relative to /home/sandbox'),
  type: z.enum(['file', 'dir', 'symlink', 'other']),
  target_type: z
    .enum(['file', 'dir', 'symlink', 'other'])
    .nullable()
    .describe('For a symlink, the type of what it points at (null: a dead link)'),
  size: z.number().int(),
  mtime: z.string(),
});
const Listing = z.object({
  path: z.string(),
  entries: z.array(Entry),
  truncated: z
    .boolean()
    .describe('true when the directory has more than 5,000 entries (the first 5,000 are listed)'),
});

const ContentQuery = z.object({
  path: PathParam,
  download: z
    .enum(['1', 'true'])
    .optional()
    .describe(
      `Serve as an attachment (any size up to ${DOWNLOAD_MAX_BYTES / 1024 / 1024} MiB) instead of inline (up to 1 MiB)`,
    ),
  archive: z
    .enum(['tar.gz'])
    .optional()
    .describe(
      `A directory as a gzipped tarball (at most ${ARCHIVE_MAX_BYTES / 1024 / 1024} MiB before compression)`,
    ),
});

const errors = {
  403: ErrorResponse,
  404: ErrorResponse,
  409: ErrorResponse,
  422: ValidationErrorResponse,
};

/** A file name fit for Content-Disposition: ASCII fallback plus the UTF-8 form. */
function disposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%;]/g, '_') || 'download';
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Feeds a read into `into`, pausing the sandbox's socket while `into` is behind. */
function pump(read: OpenedRead, into: PassThrough, transform: (chunk: Buffer) => Buffer, tail: () => Buffer) {
  into.on('drain', () => read.resume());
  read.start(
    (chunk) => {
      if (into.destroyed) return true;
      const out = transform(chunk);
      return out.length === 0 ? true : into.write(out);
    },
    (error) => {
      if (error) into.destroy(error);
      else if (!into.destroyed) into.end(tail());
    },
  );
}

export function filesRoutes(deps: WorkAccessDeps): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();

    app.get(
      '/api/conversations/:id/files',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary: "List a directory of the conversation's live sandbox",
          description:
            'Paths are relative to /home/sandbox and confined to it (symlinks are resolved in the sandbox; one ' +
            "leading outside is refused). Paddock's own `.paddock/` is never listed. Names are redacted. " +
            '409 `sandbox_not_running` when the sandbox is not live (send a prompt to wake it).',
          security,
          params: Params,
          querystring: z.object({ path: PathParam }),
          response: { 200: Listing, ...errors },
        },
      },
      async (request) => {
        const path = normalizePath(request.query.path);
        const live = await liveSandboxOf(deps.db, principalOf(request), request.params.id);
        const registry = await workRedactor(deps, live);
        return await listDirectory(deps, live.name, registry, path);
      },
    );

    app.get(
      '/api/conversations/:id/files/content',
      {
        onRequest: [app.requireAuth],
        // After the global security headers (route hooks run after the app's): a file of the
        // sandbox is never a page of this origin, even if a browser were to render it.
        onSend: async (_request, reply, payload) => {
          if (reply.statusCode === 200)
            reply.header('content-security-policy', "sandbox; default-src 'none'");
          return payload;
        },
        schema: {
          tags: [TAG],
          summary: "Read a file of the conversation's live sandbox (or a directory as a tarball)",
          description:
            'Text files up to 1 MiB inline (`text/plain`); binary files and `download=1` as an attachment ' +
            `(up to ${DOWNLOAD_MAX_BYTES / 1024 / 1024} MiB); a larger file is 413 \`file_too_large\`. ` +
            '`archive=tar.gz` on a directory: a gzipped tarball made in the sandbox, `.paddock/` left out. ' +
            "Every byte passes the conversation's redactor (so a redacted file's length can differ from its size).",
          security,
          params: Params,
          querystring: ContentQuery,
          response: {
            200: {
              description:
                'The file (text/plain or application/octet-stream) or the tarball (application/gzip)',
              content: {
                'text/plain': { schema: z.string() },
                'application/octet-stream': { schema: z.string() },
                'application/gzip': { schema: z.string() },
              },
            },
            ...errors,
            413: ErrorResponse,
          },
        },
      },
      async (request, reply) => {
        const path = normalizePath(request.query.path);
        const archive = request.query.archive === 'tar.gz';
        const download = request.query.download !== undefined;
        const live = await liveSandboxOf(deps.db, principalOf(request), request.params.id);
        const registry = await workRedactor(deps, live);
        const read = await openRead(deps, live.name, path, archive ? 'archive' : 'content');
        // A text file is shown inline up to 1 MiB; a larger one only when asked to download. A
        // binary file is always an attachment (within the download bound).
        if (!archive && !download && !read.binary && read.size > INLINE_MAX_BYTES) {
          read.abort();
          throw new AppError(
            'file_too_large',
            `the file is ${read.size} bytes; at most ${INLINE_MAX_BYTES} bytes are shown inline: download it with ?download=1`,
            { extra: { size: read.size, limit: INLINE_MAX_BYTES } },
          );
        }
        const body = new PassThrough();
        reply.raw.once('close', () => {
          read.abort();
          body.destroy();
        });
        const base = path.split('/').at(-1) || 'home';
        reply.header('cache-control', 'no-store');
        if (archive) {
          const raw = new PassThrough();
          pump(
            read,
            raw,
            (chunk) => chunk,
            () => Buffer.alloc(0),
          );
          pipeline(raw, redactTar(registry), createGzip(), body, () => {});
          return reply
            .type('application/gzip')
            .header('content-disposition', disposition(`${base}.tar.gz`))
            .send(body as unknown as string);
        }
        const redactor = registry.stream();
        pump(
          read,
          body,
          (chunk) => redactor.write(chunk),
          () => redactor.flush(),
        );
        reply.type(read.binary ? 'application/octet-stream' : 'text/plain; charset=utf-8');
        if (read.binary || download) reply.header('content-disposition', disposition(base));
        // The 200 schema describes the body for the OpenAPI document; a stream is piped as it is.
        return reply.send(body as unknown as string);
      },
    );
  };
}
