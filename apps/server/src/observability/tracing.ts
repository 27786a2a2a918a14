// Traces over OTLP (docs/operations.md "Traces"), off unless OTEL_EXPORTER_OTLP_ENDPOINT is set.
// What must hold (test/observability.tracing.test.ts):
// 1. Unset: no OpenTelemetry module is loaded and nothing is patched. Every helper here is one
//    `active === null` check and a direct call; the HTTP hooks and the sandbox client wrapper are
//    not even installed (traceRequests, traceSandboxClient return at once). The SDK is reached
//    only by the dynamic import() of startTracing; this file imports its types only (erased).
// 2. Set: spans for each HTTP request (SERVER), each database query made under another span,
//    each sandbox backend call (CLIENT), each provisioning stage and each turn, exported in
//    batches to `<endpoint>/v1/traces` as OTLP/HTTP JSON. Context flows through
//    AsyncLocalStorage, so a query made by a request's handler is that request's child.
// 3. `paddock.conversation_id` is carried by the context (withConversation): every span started
//    inside a conversation's work (its stages, turns, sandbox calls, queries) has it.
// 4. No span carries a secret: query text is the parameterised SQL (values are never read), URLs
//    are paths without their query string, a failure is recorded by its error class
//    (`error.type`), never its message (messages can quote a command's output).
// Why spans are made here by hand instead of the OpenTelemetry instrumentations: those patch
// modules as they load, which for this ES-module server needs a loader hook registered before
// anything is imported (and loads it always); a hand-made span around Fastify's hooks, pg's
// Client.query and the sandbox client's methods costs less, loads nothing when off, and names
// the operations as Paddock knows them (`sandbox create`, `provisioning clone`).
// Why module state (`active`) and not a dependency passed to each factory: the SDK is process-wide
// by its own design (the global tracer provider, the context manager, pg's prototype), so a
// handle passed around would name the same global; and the stages and turns that open spans are
// reached from several factories, each of which would carry a tracer only to hand it on. The
// state is set once, by startTracing at boot, before createDeps (startServer, startTelemetry).
import type { Attributes, Context, Span, SpanKind, Tracer } from '@opentelemetry/api';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

type OtelApi = typeof import('@opentelemetry/api');

interface Active {
  api: OtelApi;
  tracer: Tracer;
  conversationKey: symbol;
}

let active: Active | null = null;

export interface TracingHandle {
  /** Exports every finished span now (tests, shutdown). */
  flush(): Promise<void>;
  /** Flushes, stops exporting and removes the database patch. */
  stop(): Promise<void>;
}

/** Whether startTracing ran in this process (the hooks and wrappers are installed only then). */
export function tracingEnabled(): boolean {
  return active !== null;
}

/** The OTLP/HTTP traces URL of an OTEL_EXPORTER_OTLP_ENDPOINT (the base URL, as the spec defines it). */
export function tracesUrl(endpoint: string): string {
  return `${endpoint.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Loads the OpenTelemetry SDK, installs it as the global tracer provider with an
 * AsyncLocalStorage context, and patches pg so queries become spans. Once per process.
 */
export async function startTracing(options: {
  endpoint: string;
  version: string;
  /** Which traces are kept (config.tracesSampler); default: every one. */
  sampler?: { parentBased: boolean; ratio: number };
}): Promise<TracingHandle> {
  if (active) throw new Error('tracing is already started in this process');
  const [api, sdk, hooks, exporterModule, resources, pgModule] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/context-async-hooks'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('pg'),
  ]);
  const contextManager = new hooks.AsyncLocalStorageContextManager().enable();
  api.context.setGlobalContextManager(contextManager);
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read by the SDK's detector, override the defaults.
  const resource = resources
    .resourceFromAttributes({ 'service.name': 'paddock-server', 'service.version': options.version })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const exporter = new exporterModule.OTLPTraceExporter({ url: tracesUrl(options.endpoint) });
  const { parentBased = true, ratio = 1 } = options.sampler ?? {};
  const root =
    ratio >= 1
      ? new sdk.AlwaysOnSampler()
      : ratio <= 0
        ? new sdk.AlwaysOffSampler()
        : new sdk.TraceIdRatioBasedSampler(ratio);
  const provider = new sdk.TracerProvider({
    resource,
    sampler: parentBased ? new sdk.ParentBasedSampler({ root }) : root,
    spanLimits: { attributeValueLengthLimit: 4096 },
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter })],
  });
  api.trace.setGlobalTracerProvider(provider);
  const state: Active = {
    api,
    tracer: provider.getTracer('paddock-server', options.version),
    conversationKey: api.createContextKey('paddock.conversation_id') as symbol,
  };
  active = state;
  const unpatch = patchPg(pgModule.default, state);
  return {
    flush: () => provider.forceFlush(),
    stop: async () => {
      unpatch();
      active = null;
      await provider.shutdown();
      api.trace.disable();
      api.context.disable();
    },
  };
}

function conversationOf(state: Active, ctx: Context): string | undefined {
  const value = ctx.getValue(state.conversationKey);
  return typeof value === 'string' ? value : undefined;
}

function failed(state: Active, span: Span, err: unknown): void {
  span.setAttribute('error.type', err instanceof Error ? err.constructor.name : typeof err);
  span.setStatus({ code: state.api.SpanStatusCode.ERROR });
}

function begin(state: Active, name: string, attributes: Attributes, kind: SpanKind | undefined): Span {
  const ctx = state.api.context.active();
  const conversationId = conversationOf(state, ctx);
  return state.tracer.startSpan(
    name,
    {
      attributes: conversationId ? { ...attributes, 'paddock.conversation_id': conversationId } : attributes,
      ...(kind !== undefined ? { kind } : {}),
    },
    ctx,
  );
}

/**
 * Runs `work` inside a span (the active span while it runs); off: runs `work` directly. The
 * span ends when the promise settles; a rejection marks it failed with the error's class.
 */
export function withSpan<T>(
  name: string,
  attributes: Attributes,
  work: () => Promise<T>,
  kind: 'client' | 'internal' = 'internal',
): Promise<T> {
  const state = active;
  if (state === null) return work();
  const span = begin(state, name, attributes, kind === 'client' ? state.api.SpanKind.CLIENT : undefined);
  return state.api.context.with(state.api.trace.setSpan(state.api.context.active(), span), async () => {
    try {
      return await work();
    } catch (err) {
      failed(state, span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * Runs `work` with the conversation's id in the context: every span started inside carries it.
 * A new root: a conversation's work outlives the request that kicked it, so its provisioning
 * and turns are traces of their own, not minutes-long children of a 202.
 */
export function withConversation<T>(conversationId: string, work: () => Promise<T>): Promise<T> {
  const state = active;
  if (state === null) return work();
  const ctx = state.api.ROOT_CONTEXT.setValue(state.conversationKey, conversationId);
  return state.api.context.with(ctx, work);
}

// --- HTTP requests (Fastify) -----------------------------------------------------------------

interface RequestTrace {
  span: Span;
  ctx: Context;
}

/**
 * Installs the request span hooks: the first onRequest hook starts a SERVER span and runs the
 * rest of the request in its context; preValidation and preHandler enter it again (the body is
 * parsed in the socket's context, not the request's); onResponse names it by its route and ends
 * it. Call before any other hook is added. Off: installs nothing. `untraced`: requests that get no
 * span (the health probes, polled every few seconds by the orchestrator).
 */
export function traceRequests(
  app: FastifyInstance,
  untraced: (request: FastifyRequest) => boolean = () => false,
): void {
  const state = active;
  if (state === null) return;
  const { api } = state;
  const traces = new WeakMap<FastifyRequest, RequestTrace>();
  const reenter = (request: FastifyRequest, _reply: FastifyReply, done: () => void) => {
    const trace = traces.get(request);
    if (trace) api.context.with(trace.ctx, done);
    else done();
  };
  app.addHook('onRequest', (request, _reply, done) => {
    if (untraced(request)) {
      done();
      return;
    }
    const route = request.routeOptions.url;
    const path = request.url.split('?')[0] ?? '/';
    const span = begin(
      state,
      route ? `${request.method} ${route}` : request.method,
      {
        'http.request.method': request.method,
        'url.path': path,
        'url.scheme': request.protocol,
        ...(route ? { 'http.route': route } : {}),
      },
      api.SpanKind.SERVER,
    );
    const ctx = api.trace.setSpan(api.context.active(), span);
    traces.set(request, { span, ctx });
    api.context.with(ctx, done);
  });
  app.addHook('preValidation', reenter);
  app.addHook('preHandler', reenter);
  const end = (request: FastifyRequest, status: number | null) => {
    const trace = traces.get(request);
    if (!trace) return;
    traces.delete(request);
    if (status !== null) {
      trace.span.setAttribute('http.response.status_code', status);
      if (status >= 500) {
        trace.span.setAttribute('error.type', String(status));
        trace.span.setStatus({ code: api.SpanStatusCode.ERROR });
      }
    } else {
      trace.span.setAttribute('error.type', 'aborted');
    }
    trace.span.end();
  };
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    end(request, null);
    done();
  });
}

// --- Sandbox backend calls -------------------------------------------------------------------

/**
 * The client with each method call as a CLIENT span `sandbox <method>` (the sandbox's name as
 * `paddock.sandbox.name`); off: the client itself, untouched.
 */
export function traceSandboxClient<C extends object>(client: C, backend: string): C {
  if (active === null) return client;
  let address = backend;
  try {
    address = new URL(backend).host;
  } catch {
    // not a URL: named as given
  }
  const traced: Record<string, unknown> = {};
  for (const [method, fn] of Object.entries(client)) {
    if (typeof fn !== 'function') {
      traced[method] = fn;
      continue;
    }
    traced[method] = (...args: unknown[]) =>
      withSpan(
        `sandbox ${method}`,
        {
          'paddock.sandbox.operation': method,
          'server.address': address,
          ...(typeof args[0] === 'string' ? { 'paddock.sandbox.name': args[0] } : {}),
        },
        () => Promise.resolve((fn as (...a: unknown[]) => unknown).apply(client, args)),
        'client',
      );
  }
  return traced as C;
}

// --- Database queries (pg) -------------------------------------------------------------------

const MAX_QUERY_TEXT = 2048;

/** The first keyword of a statement: SELECT, INSERT, WITH, ... */
function operationOf(text: string): string {
  const match = /^\s*([A-Za-z]+)/.exec(text);
  return match?.[1]?.toUpperCase() ?? 'QUERY';
}

type QueryFn = (this: unknown, ...args: unknown[]) => unknown;
type Callback = (err: unknown, result: unknown) => void;

/**
 * Wraps pg's Client.prototype.query: a query made while a span is active becomes its child
 * `db <OPERATION>` span with the statement's text (never its values). Queries with no active
 * span (the job queue's polls, the LISTEN connections, the lifecycle clock) are not traced:
 * thousands of parentless spans an hour would say nothing. Pool.connect's callback is bound to
 * the caller's context, so a query that waited for a connection stays with its caller.
 * Returns the undo.
 */
function patchPg(pg: Pick<typeof import('pg'), 'Client' | 'Pool'>, state: Active): () => void {
  const { api } = state;
  const clientProto = pg.Client.prototype as unknown as { query: QueryFn };
  const poolProto = pg.Pool.prototype as unknown as { connect: QueryFn };
  const originalQuery = clientProto.query;
  const originalConnect = poolProto.connect;

  clientProto.query = function tracedQuery(this: unknown, ...args: unknown[]): unknown {
    const ctx = api.context.active();
    // No span, or one the sampler dropped: nothing to be a child of.
    if (api.trace.getSpan(ctx)?.isRecording() !== true) return originalQuery.apply(this, args);
    const config = args[0] as { text?: unknown; submit?: unknown } | string | undefined;
    const text = typeof config === 'string' ? config : config?.text;
    // A Submittable (cursor, stream) reports through its own events: passed through untraced.
    if (typeof text !== 'string' || (typeof config === 'object' && typeof config?.submit === 'function')) {
      return originalQuery.apply(this, args);
    }
    const operation = operationOf(text);
    const span = begin(
      state,
      `db ${operation}`,
      {
        'db.system': 'postgresql',
        'db.system.name': 'postgresql',
        'db.operation.name': operation,
        'db.query.text': text.length > MAX_QUERY_TEXT ? text.slice(0, MAX_QUERY_TEXT) : text,
      },
      api.SpanKind.CLIENT,
    );
    const finish = (err: unknown) => {
      if (err) failed(state, span, err);
      span.end();
    };
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as Callback;
      args[last] = (err: unknown, result: unknown) => {
        finish(err);
        callback(err, result);
      };
      return originalQuery.apply(this, args);
    }
    const result = originalQuery.apply(this, args);
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(
        () => finish(null),
        (err: unknown) => finish(err ?? new Error('query failed')),
      );
    } else {
      span.end();
    }
    return result;
  };

  poolProto.connect = function tracedConnect(this: unknown, ...args: unknown[]): unknown {
    if (typeof args[0] === 'function') {
      args[0] = api.context.bind(api.context.active(), args[0] as Callback);
    }
    return originalConnect.apply(this, args);
  };

  return () => {
    clientProto.query = originalQuery;
    poolProto.connect = originalConnect;
  };
}
