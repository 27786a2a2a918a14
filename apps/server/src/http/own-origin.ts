// The origin a request reached this server at, for pages that print links back to it (the
// API docs' server list, /llms.txt). With PUBLIC_URL set it is always PUBLIC_URL. In
// development the stand-in is the origin the server prints (http://127.0.0.1:PORT), but a
// person may have opened localhost or [::1], and a page that names another origin than its
// own loses the session cookie on "Try it out"; so the Host header is used, but only when it
// is one of the origins the CSRF check already counts as this site (allowedOrigins). Anything
// else falls back to PUBLIC_URL's stand-in: no caller-chosen text ever reaches a page.
import type { FastifyRequest } from 'fastify';
import { allowedOrigins } from '../auth/csrf.ts';
import type { Config } from '../config/config.ts';

export function ownOriginResolver(config: Config): (request: FastifyRequest) => string {
  const fallback = config.publicUrl.origin;
  if (config.publicUrlConfigured) return () => fallback;
  const allowed = allowedOrigins(config);
  return (request) => {
    const host = request.headers.host;
    if (typeof host !== 'string' || host === '') return fallback;
    const claimed = `${request.protocol}://${host}`;
    return allowed.has(claimed) ? claimed : fallback;
  };
}
