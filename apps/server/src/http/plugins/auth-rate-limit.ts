// The stricter per-IP budget of credential and mail-sending routes (AUTH_RATE_LIMIT_MAX
// per minute), counted IN ADDITION to the global limit: a route-level `config.rateLimit`
// would replace the global limit for the route instead (issue 14, finding 12). Each call
// makes one bucket per client address; register the hook on one route, and that route's
// implicit HEAD shares it (a HEAD is counted with its GET, never in a bucket of its own).
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import type { Config } from '../../config/config.ts';
import { AppError } from '../errors.ts';
import { rateLimitKey } from './rate-limit-key.ts';

export function authRateLimit(app: FastifyInstance, config: Config): onRequestHookHandler {
  const check = app.createRateLimit({
    max: config.rateLimit.authMax,
    timeWindow: 60_000,
    // The route in the key: a store shared by the replicas keeps every route's bucket in one
    // table (rate-limit-store.ts); a HEAD shares its GET's route, and so its bucket.
    keyGenerator: (request) => `${request.routeOptions.url ?? ''} ${rateLimitKey(request.ip)}`,
    allowList: () => false,
  });
  return async (request) => {
    const result = await check(request);
    if (result.isAllowed || !result.isExceeded) return;
    const seconds = Math.max(1, result.ttlInSeconds);
    throw new AppError('rate_limited', `rate limit exceeded, retry in ${seconds} s`, {
      headers: { 'retry-after': String(seconds) },
    });
  };
}
