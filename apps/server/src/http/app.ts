// The Fastify app factory: builds the public listener's app without listening, so tests
// use app.inject() or listen on port 0 themselves.
import { randomUUID } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  LogController,
} from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  isResponseSerializationError,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { referencesDeletedAccount } from '../accounts/account-deletion.repo.ts';
import { authPlugin } from '../auth/auth.plugin.ts';
import { createConsoleHandler } from '../console/console.ts';
import { isDatabaseUnavailable } from '../db/database.ts';
import type { Deps } from '../deps.ts';
import { reportError } from '../observability/error-reports.ts';
import { logFormatOf } from '../observability/logger.ts';
import { traceRequests } from '../observability/tracing.ts';
import { registerReadableAccessLog } from './access-log.ts';
import { registerApiDocs } from './api-docs.ts';
import { createClientErrorHandler, createFrameworkErrorHandler } from './early-errors.ts';
import { AppError, type ErrorBody, type FieldErrors } from './errors.ts';
import { RefusedBody, registerJsonBodyParser, shapeError } from './json-body.ts';
import { capFieldErrors, createProblemList, jsonShapeProblem } from './json-bounds.ts';
import { describeOperation, SECURITY_SCHEMES } from './openapi-operations.ts';
import { ownOriginResolver } from './own-origin.ts';
import { rateLimitKey } from './plugins/rate-limit-key.ts';
import { createPostgresRateLimitStore } from './plugins/rate-limit-store.ts';
import { isHealthProbe, registerSecurity } from './plugins/security.ts';
import { registerRoutes } from './routes.ts';

export type App = FastifyInstance;

export interface RouteEntry {
  method: string;
  url: string;
  hasSchema: boolean;
  schemaless: boolean;
  /** The largest request body this route accepts, in bytes. */
  bodyLimit: number;
}

/**
 * Body limit of every route that does not declare its own: enough for the account, key and
 * admin routes. Routes that accept more say so (resources, secrets, apply; docs/api.md).
 */
export const DEFAULT_BODY_LIMIT = 16 * 1024;

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered on this app, for the schema-coverage check and /llms.txt. */
    routeTable: RouteEntry[];
  }
  interface FastifyContextConfig {
    /** Marks a route that intentionally has no schema (non-JSON endpoints such as /api/docs). */
    schemaless?: boolean;
  }
}

/** SQLSTATE 22021 character_not_in_repertoire, 22P05 untranslatable_character. */
function isUnstorableText(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '22021' || code === '22P05';
}

export async function buildApp(deps: Deps): Promise<FastifyInstance> {
  const { config, logger, metrics } = deps;
  // The readable format writes its own short access lines (access-log.ts); JSON keeps Fastify's.
  const readable = logFormatOf(logger) === 'pretty';
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: readable }),
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    // TRUSTED_PROXIES: only these peers may set X-Forwarded-For/-Proto. Without it every
    // proxied client shares the proxy's address (and so one rate-limit bucket).
    trustProxy: config.trustedProxies.length > 0 ? [...config.trustedProxies] : false,
    bodyLimit: DEFAULT_BODY_LIMIT,
    return503OnClosing: true,
    // Requests that fail before routing answer like every other error (early-errors.ts).
    frameworkErrors: createFrameworkErrorHandler(() => self, config),
    clientErrorHandler: createClientErrorHandler(config),
    routerOptions: { ignoreTrailingSlash: true },
  }).withTypeProvider<ZodTypeProvider>();
  const self: FastifyInstance = app;
  // First of all hooks: the request's span covers the rest (nothing is added when tracing is off).
  traceRequests(self, (request) => isHealthProbe(request.routeOptions.url ?? ''));

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  const routeTable: RouteEntry[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/api/docs')) route.config = { ...(route.config ?? {}), schemaless: true };
    describeOperation(route, { requireAuth: self.requireAuth, requireAdmin: self.requireAdmin });
    const schema = route.schema as Record<string, unknown> | undefined;
    const hasSchema =
      !!schema && ['body', 'querystring', 'params', 'response'].some((k) => schema[k] !== undefined);
    for (const method of [route.method].flat()) {
      routeTable.push({
        method,
        url: route.url,
        hasSchema,
        schemaless: route.config?.schemaless === true,
        bodyLimit: route.bodyLimit ?? DEFAULT_BODY_LIMIT,
      });
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  // Metrics: duration by route template (never the raw URL: ids would explode cardinality).
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpDuration.observe(
      { method: request.method, route, status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    // Every 429 is a rate-limit refusal (the global and auth limits, the sign-in and export throttles).
    if (reply.statusCode === 429) metrics.rateLimitRefusals.inc({ route });
  });

  if (readable) registerReadableAccessLog(self);

  registerSecurity(app, config);

  // Sizes before parsing (json-body.ts), then sizes before schemas: a parsed body is
  // checked for depth, entries and key lengths before any per-entry validation runs
  // (json-bounds.ts). Both after authentication (onRequest), so an anonymous caller learns
  // nothing about a route's schema.
  registerJsonBodyParser(app);
  app.addHook('preValidation', async (request) => {
    if (request.body instanceof RefusedBody) throw shapeError(request.body.problem);
    const problem = jsonShapeProblem(request.body);
    if (problem) throw shapeError(problem);
  });

  // RATE_LIMIT_STORE=postgres: one count per client address across every replica
  // (plugins/rate-limit-store.ts); the default counts in this node's memory.
  const sharedCounts =
    config.rateLimit.store === 'postgres'
      ? createPostgresRateLimitStore({
          pool: deps.database.pool,
          onSweepError: (err) =>
            logger.warn(
              { err: err instanceof Error ? err.message : String(err) },
              'deleting the ended rate-limit buckets failed',
            ),
        })
      : null;
  if (sharedCounts) app.addHook('onClose', async () => sharedCounts.close());

  // Per-client-IP limit on /api, per node unless shared (above). It runs as an app-wide
  // onRequest hook, registered before the authentication plugin: a route's own onRequest hooks
  // (requireAuth) run after every app-wide one, so failed authentication is metered too. The
  // plugin's `global` option would append the limiter to each route's hooks, after
  // requireAuth, and a bad key would never reach it (issue 39, finding 5).
  await app.register(rateLimit, {
    global: false,
    ...(sharedCounts ? { store: sharedCounts.Store, skipOnError: true } : {}),
    max: config.rateLimit.max,
    timeWindow: config.rateLimit.windowSeconds * 1000,
    hook: 'onRequest',
    keyGenerator: (request) => rateLimitKey(request.ip),
    // Decided on the matched route, never the raw URL (`/%61pi/…` routes to `/api/…`).
    // Unmatched requests (the not-found handler below) pass the same hook.
    allowList: (request) => isHealthProbe(request.routeOptions.url ?? ''),
    addHeadersOnExceeding: {
      'x-ratelimit-limit': true,
      'x-ratelimit-remaining': true,
      'x-ratelimit-reset': true,
    },
    addHeaders: {
      'x-ratelimit-limit': true,
      'x-ratelimit-remaining': true,
      'x-ratelimit-reset': true,
      'retry-after': true,
    },
    errorResponseBuilder: (_request, context) =>
      new AppError('rate_limited', `rate limit exceeded, retry in ${Math.ceil(context.ttl / 1000)} s`, {
        headers: { 'retry-after': String(Math.max(1, Math.ceil(context.ttl / 1000))) },
      }),
  });
  app.addHook('onRequest', app.rateLimit());

  await app.register(authPlugin, {
    db: deps.db,
    config,
    principals: deps.principals,
    resolvers: deps.authResolvers,
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Paddock API',
        description:
          'Run AI coding agents in isolated sandboxes. Authenticate with `Authorization: Bearer <API key>`.',
        version: deps.version,
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      },
      servers: [{ url: config.publicUrl.origin }],
      components: {
        securitySchemes: SECURITY_SCHEMES,
      },
    },
    transform: jsonSchemaTransform,
  });
  await registerApiDocs(app, ownOriginResolver(config));

  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    if (error instanceof AppError) {
      for (const [k, v] of Object.entries(error.headers)) reply.header(k, v);
      const fieldErrors = error.extra['errors'] as FieldErrors | undefined;
      const body: ErrorBody = {
        ...error.extra,
        ...(fieldErrors ? capFieldErrors(fieldErrors) : {}),
        error: error.code,
        message: error.message,
      };
      return reply.code(error.status).send(body);
    }
    if (hasZodFastifySchemaValidationErrors(error)) {
      // At most MAX_LISTED_PROBLEMS problems are rendered; the rest are only counted.
      const problems = createProblemList();
      for (const issue of error.validation) {
        const params = issue.params as { issue?: { path?: PropertyKey[] } } | undefined;
        const path =
          params?.issue?.path?.map(String).join('.') ||
          issue.instancePath.replace(/^\//, '').replaceAll('/', '.');
        problems.add(path === '' ? (error.validationContext ?? 'body') : path, issue.message ?? 'is invalid');
      }
      return reply
        .code(422)
        .send({ error: 'validation_failed', message: 'validation failed', ...problems.result() });
    }
    if (isResponseSerializationError(error)) {
      request.log.error({ err: error, route: request.routeOptions.url }, 'response did not match its schema');
      reportError(error, {
        tags: { route: request.routeOptions.url ?? 'unmatched', request_id: request.id },
      });
      return reply.code(500).send({ error: 'internal_error', message: 'internal error' });
    }
    if (isUnstorableText(error)) {
      // PostgreSQL refuses NUL and invalid characters in text; that is the caller's input.
      return reply.code(422).send({
        error: 'validation_failed',
        message: 'validation failed',
        errors: { body: ['contains characters that cannot be stored (such as NUL)'] },
      });
    }
    const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
    if (status === 429) {
      return reply.code(429).send({ error: 'rate_limited', message: 'rate limit exceeded' });
    }
    if (status >= 400 && status < 500) {
      // Fastify's own client errors: malformed JSON, body too large (every body that is not
      // JSON is refused by the parser of json-body.ts, with invalid_body).
      const code = status === 413 ? 'payload_too_large' : status === 404 ? 'not_found' : 'invalid_body';
      const message =
        error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error instanceof SyntaxError
          ? 'request body is not valid JSON'
          : error.message;
      return reply.code(status).send({ error: code, message });
    }
    if (isDatabaseUnavailable(error)) {
      request.log.warn({ err: error }, 'database unavailable');
      return reply
        .code(503)
        .header('retry-after', '1')
        .send({ error: 'service_unavailable', message: 'the database is unavailable; retry shortly' });
    }
    if (referencesDeletedAccount(error)) {
      return reply.code(401).send({ error: 'unauthorized', message: 'missing or invalid credentials' });
    }
    request.log.error({ err: error }, 'unhandled error');
    reportError(error, { tags: { route: request.routeOptions.url ?? 'unmatched', request_id: request.id } });
    // A 5xx never echoes internals.
    return reply.code(500).send({ error: 'internal_error', message: 'internal error' });
  });

  // Paths no route owns: the web console's files and client-side routes (GET/HEAD outside
  // /api, /auth, /health, /metrics), else the JSON 404.
  const webConsole = createConsoleHandler(config);
  app.setNotFoundHandler((request, reply) => {
    if (webConsole.handles(request) && webConsole.serve(request, reply)) return;
    reply
      .code(404)
      .send({ error: 'not_found', message: `no route for ${request.method} ${request.url.split('?')[0]}` });
  });

  await registerRoutes(app, deps);
  return app;
}
