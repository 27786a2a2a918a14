// CSRF protection for browser (cookie) requests. Invariants (sessions.http.test.ts):
// - A cookie-authenticated request with an unsafe method (anything but GET/HEAD/OPTIONS)
//   must carry an Origin header, or failing that a Referer, whose origin is PUBLIC_URL's
//   origin or one listed in CHECK_ORIGIN_EXTRA; otherwise 403 csrf_failed.
// - Any unsafe request WITHOUT a bearer key that carries a foreign Origin/Referer is
//   refused too (login CSRF: a foreign page must not sign the browser into another account).
// - Requests with `Authorization: Bearer` are never subject to the check: a browser never
//   attaches that header by itself, so they cannot be forged cross-site.
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config/config.ts';
import { AppError } from '../http/errors.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function isUnsafeMethod(method: string): boolean {
  return !SAFE_METHODS.has(method.toUpperCase());
}

/**
 * The origins that count as this site. With PUBLIC_URL set: exactly its origin (plus
 * CHECK_ORIGIN_EXTRA). Without it (development): every loopback form of the listening address
 * and the address the server prints, so the printed URL can sign in
 * (api-hardening.origins.test.ts).
 */
export function allowedOrigins(config: Config): Set<string> {
  const own = config.publicUrlConfigured ? [config.publicUrl.origin] : developmentOrigins(config);
  return new Set([...own, ...config.checkOriginExtra]);
}

function developmentOrigins(config: Config): string[] {
  const hosts = ['localhost', '127.0.0.1', '[::1]'];
  const bound = config.host.includes(':') ? `[${config.host}]` : config.host;
  if (bound !== '0.0.0.0' && bound !== '[::]') hosts.push(bound);
  const origins = [config.publicUrl.origin];
  for (const host of hosts) {
    try {
      origins.push(new URL(`http://${host}:${config.port}`).origin);
    } catch {
      // A HOST that is no URL host name cannot be an origin either.
    }
  }
  return origins;
}

/** The origin the browser claims for this request, from Origin or else Referer; null when neither. */
export function requestOrigin(request: FastifyRequest): string | null {
  const origin = request.headers.origin;
  if (typeof origin === 'string' && origin !== '' && origin !== 'null') return origin;
  if (origin === 'null') return 'null';
  const referer = request.headers.referer;
  if (typeof referer === 'string' && referer !== '') {
    try {
      return new URL(referer).origin;
    } catch {
      return 'null';
    }
  }
  return null;
}

export function csrfError(): AppError {
  return new AppError(
    'csrf_failed',
    'cross-site request refused: the Origin header does not match this site',
  );
}

/** For cookie-authenticated requests: the origin must be present and allowed. */
export function assertSameOrigin(request: FastifyRequest, allowed: Set<string>): void {
  if (!isUnsafeMethod(request.method)) return;
  const origin = requestOrigin(request);
  if (origin === null || !allowed.has(origin)) throw csrfError();
}

/** For requests without credentials: a present origin must be allowed; an absent one is fine (CLI). */
export function assertNotCrossSite(request: FastifyRequest, allowed: Set<string>): void {
  if (!isUnsafeMethod(request.method)) return;
  const origin = requestOrigin(request);
  if (origin !== null && !allowed.has(origin)) throw csrfError();
}
