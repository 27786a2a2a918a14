// What the OpenAPI document says about each operation, derived in one place from the route
// definitions (issue 14, finding 13) instead of by hand in every route file:
// - `security`: an operation whose onRequest hooks include requireAuth or requireAdmin is
//   marked with both credentials (bearer key, session cookie); every other one with
//   `security: []`, so generated clients know which calls need credentials.
// - `operationId`: the route's own, else derived from method and path
//   (`POST /api/environments/:id/secrets` → `postEnvironmentsByIdSecrets`), stable and unique.
// - a documented 4xx: the route's own, else 401/403 for protected operations and 429 (every
//   operation is rate limited).
// The served document is linted with Redocly's recommended rules in npm test
// (api-hardening.openapi.test.ts).
import type { RouteOptions } from 'fastify';
import { ErrorResponse } from '../resources/responses.ts';

export const SECURITY_SCHEMES = {
  bearer: { type: 'http', scheme: 'bearer', description: 'An API key from POST /api/auth/token' },
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: 'paddock_session',
    description: 'The browser session cookie set by POST /api/auth/login',
  },
} as const;

const PROTECTED = [{ bearer: [] }, { session: [] }];

const pascal = (s: string) =>
  s
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');

export function operationIdOf(method: string, url: string): string {
  const segments = url
    .replace(/^\/api(?=\/|$)/, '')
    .split('/')
    .filter(Boolean)
    .map((s) => (s.startsWith(':') ? `By${pascal(s.slice(1))}` : pascal(s)));
  return `${method.toLowerCase()}${segments.join('')}`;
}

/** Fills security, operationId and a 4xx into a route's schema before it is registered. */
export function describeOperation(
  route: RouteOptions,
  auth: { requireAuth?: unknown; requireAdmin?: unknown },
): void {
  const schema = route.schema as Record<string, unknown> | undefined;
  if (!schema || schema['hide'] === true) return;
  const hooks = [route.onRequest ?? []].flat();
  const admin = auth.requireAdmin !== undefined && hooks.includes(auth.requireAdmin as never);
  const authenticated =
    admin || (auth.requireAuth !== undefined && hooks.includes(auth.requireAuth as never));
  schema['security'] = authenticated ? PROTECTED : [];
  const method = [route.method].flat()[0] ?? 'GET';
  schema['operationId'] ??= operationIdOf(method, route.url);
  const response = (schema['response'] ?? {}) as Record<string, unknown>;
  schema['response'] = {
    ...response,
    ...(authenticated && response['401'] === undefined ? { 401: ErrorResponse } : {}),
    ...(admin && response['403'] === undefined ? { 403: ErrorResponse } : {}),
    ...(response['429'] === undefined ? { 429: ErrorResponse } : {}),
  };
}
