// The web console: the built single-page app (apps/web/dist) served at `/`. It answers from
// the not-found handler (http/app.ts), not a wildcard route, so the router's own refusals
// (a path parameter over its length: 414) stay what they are. Invariants
// (apps/server/test/console.http.test.ts):
// - Only GET/HEAD of paths no route owns reach here. Paths under /api, /auth, /health and
//   /metrics answer the JSON 404 like any unknown route: a missing API route must never
//   look like a page, and /metrics never exists on the public listener.
// - A path naming a file of the build answers that file: hashed files under /assets/ with a
//   year-long immutable cache, the few unhashed ones (favicon, theme script) with no-cache.
//   A missing file (a path with an extension) is a 404, never the app.
// - Every other path is a client-side route: index.html, `no-cache`, so a deploy is picked
//   up on the next navigation while the hashed assets stay cached.
// - Files are read once at boot (the build is immutable while the process runs) and
//   compressed once; nothing resolves a request path on disk, so no traversal is possible.
// - /account/billing exists only with BILLING_ENABLED (test/billing.off.test.ts).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.ts';
import { AppError } from '../http/errors.ts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg', '.json', '.txt', '.map']);
const IMMUTABLE = 'public, max-age=31536000, immutable';
const NO_CACHE = 'no-cache';

/**
 * Paths that belong to the server, never to the app: an unknown one is a JSON 404 (so
 * /terms and /privacy do not exist at all without the LEGAL_* variables).
 */
const SERVER_PATHS = /^\/(api|auth|health|metrics)(\/|$)|^\/(terms|privacy|skill|llms\.txt|llms-full\.txt)$/;

interface Asset {
  body: Buffer;
  gzip: Buffer | null;
  type: string;
  cacheControl: string;
}

function loadBuild(dir: string): Map<string, Asset> | null {
  if (!existsSync(join(dir, 'index.html'))) return null;
  const assets = new Map<string, Asset>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const file = join(d, name);
      if (statSync(file).isDirectory()) {
        walk(file);
        continue;
      }
      const url = `/${relative(dir, file).split(sep).join('/')}`;
      const ext = extname(name).toLowerCase();
      const body = readFileSync(file);
      const gzip = COMPRESSIBLE.has(ext) && body.length > 1024 ? gzipSync(body, { level: 9 }) : null;
      assets.set(url, {
        body,
        gzip,
        type: TYPES[ext] ?? 'application/octet-stream',
        cacheControl: url.startsWith('/assets/') ? IMMUTABLE : NO_CACHE,
      });
    }
  };
  walk(dir);
  return assets;
}

function send(request: FastifyRequest, reply: FastifyReply, asset: Asset) {
  // Answered from the not-found handler, whose replies default to 404.
  reply.code(200).header('content-type', asset.type).header('cache-control', asset.cacheControl);
  const acceptsGzip = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
  if (asset.gzip) {
    reply.header('vary', 'accept-encoding');
    if (acceptsGzip) return reply.header('content-encoding', 'gzip').send(asset.gzip);
  }
  return reply.send(asset.body);
}

export interface ConsoleHandler {
  /** Whether this request is the console's to answer (GET/HEAD outside the server's paths). */
  handles(request: FastifyRequest): boolean;
  /** Answers it: a file of the build, index.html for a client-side route, or null for a 404. */
  serve(request: FastifyRequest, reply: FastifyReply): FastifyReply | null;
}

/** Pages that exist only with BILLING_ENABLED: off, they answer the JSON 404 like an unknown route. */
const BILLING_PAGES = /^\/account\/billing\/?$/;

export function createConsoleHandler(
  config: Pick<Config, 'consoleDir'> & { billing: Pick<Config['billing'], 'enabled'> },
): ConsoleHandler {
  const assets = loadBuild(config.consoleDir);
  const index = assets?.get('/index.html');
  return {
    handles(request) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return false;
      const path = request.url.split('?')[0] ?? '/';
      if (!config.billing.enabled && BILLING_PAGES.test(path)) return false;
      return !SERVER_PATHS.test(path);
    },
    serve(request, reply) {
      if (!assets || !index) {
        throw new AppError(
          'service_unavailable',
          'the web console is not built on this server: run `npm run build:web` (npm start does it when it is missing)',
        );
      }
      let path: string;
      try {
        path = decodeURIComponent(request.url.split('?')[0] ?? '/');
      } catch {
        return null;
      }
      const asset = assets.get(path);
      if (asset && path !== '/index.html') return send(request, reply, asset);
      if (extname(path) !== '' || path.startsWith('/assets/')) return null;
      return send(request, reply, index);
    },
  };
}
