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

  app.addHook('onSend', async (_request, reply, payload) => {
    // Routes that need a different policy (the interactive API docs) set their own.
    if (!reply.hasHeader('content-security-policy'))
      reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('x-frame-options', 'DENY');
    reply.header('referrer-policy', 'strict-origin-when-cross-origin');
    reply.header('cross-origin-opener-policy', 'same-origin');
    reply.header('permissions-policy', 'camera=(), microphone=(), geolocation=()');
    if (config.httpsOnly) reply.header('strict-transport-security', HSTS);
    return payload;
  });
}
