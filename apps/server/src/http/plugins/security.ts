import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config/config.ts';

const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const HSTS = 'max-age=31536000; includeSubDomains';

/** Paths exempt from the HTTPS redirect: load balancers probe over plain HTTP. */
export function isHealthProbe(url: string): boolean {
  const path = url.split('?')[0];
  return path === '/health' || path === '/health/ready';
}

/**
 * Edge behaviour: HTTPS redirect (when PUBLIC_URL is https; X-Forwarded-Proto is honoured
 * only from TRUSTED_PROXIES because Fastify's trustProxy gates request.protocol), HSTS,
 * and security headers on every response.
 */
export function registerSecurity(app: FastifyInstance, config: Config): void {
  if (config.httpsOnly) {
    app.addHook('onRequest', async (request, reply) => {
      if (request.protocol === 'https' || isHealthProbe(request.url)) return;
      // Concatenate, never resolve: `//evil.example/x` must stay a path on our own origin.
      const target = `${config.publicUrl.origin}${request.url.startsWith('/') ? '' : '/'}${request.url}`;
      const status = request.method === 'GET' || request.method === 'HEAD' ? 301 : 308;
      return reply.code(status).header('location', target).send();
    });
  }

  const headers = securityHeaders(config);
  app.addHook('onSend', async (_request, reply, payload) => {
    // One policy for every page, the interactive API docs included (http/api-docs.ts).
    for (const [name, value] of Object.entries(headers)) reply.header(name, value);
    return payload;
  });
}

/** The headers every response carries, however early it is answered (early-errors.ts too). */
export function securityHeaders(config: Pick<Config, 'httpsOnly'>): Record<string, string> {
  return {
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'strict-origin-when-cross-origin',
    'cross-origin-opener-policy': 'same-origin',
    'permissions-policy': 'camera=(), microphone=(), geolocation=()',
    ...(config.httpsOnly ? { 'strict-transport-security': HSTS } : {}),
  };
}
