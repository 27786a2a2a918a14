// Error reports (docs/operations.md "Error reports"), off unless ERROR_TRACKING_DSN is set.
// What must hold (test/observability.error-reports.test.ts):
// 1. Unset: @sentry/node is never loaded and reportError is a no-op; nothing leaves the instance.
// 2. Set: the Sentry SDK (loaded by dynamic import) reports what the server could not handle:
//    5xx errors of requests (http/app.ts), a conversation server that failed, failed jobs,
//    unhandled rejections and uncaught exceptions. Its own OpenTelemetry setup, tracing, module
//    hooks, breadcrumbs and default PII stay off: an event is the error and the context given here.
// 3. Every event is scrubbed before it is sent (scrubEvent): every secret value registered for
//    redaction in this process, the deployment's own credentials, bearer tokens and API keys in
//    any string; the request's headers that carry credentials, its cookies, body and query.
// Module state (`active`), as in tracing.ts: the Sentry SDK keeps one client per process itself;
// reportError is reached from the error handler, the conversation server and the job wrapper.
import type { ErrorEvent, Event } from '@sentry/node';

type SentryModule = typeof import('@sentry/node');

/** Replaces every secret a scrubber knows in a string (each returns the text, redacted). */
export type Scrubber = (text: string) => string;

export const SCRUBBED = '[redacted]';

interface Active {
  sentry: SentryModule;
}

let active: Active | null = null;

export interface ErrorReportsHandle {
  /** Sends every queued event (tests, shutdown). */
  flush(timeoutMs?: number): Promise<boolean>;
  stop(): Promise<void>;
}

export interface ReportContext {
  /** Searchable labels (route, job, conversation id): never a secret. */
  tags?: Record<string, string>;
}

/** Whether startErrorReports ran in this process. */
export function errorReportsEnabled(): boolean {
  return active !== null;
}

/** Reports an error the server could not handle; off: does nothing. */
export function reportError(error: unknown, context: ReportContext = {}): void {
  const state = active;
  if (state === null) return;
  state.sentry.captureException(error, context.tags ? { tags: context.tags } : undefined);
}

/** Headers whose values are credentials (the log redaction's list, and the usual API key headers). */
const CREDENTIAL_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-csrf-token',
  'x-api-key',
  'api-key',
]);

/** Credentials by form, whoever they belong to: a bearer token, a Paddock API key, a URL's password. */
const CREDENTIAL_FORMS: [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, `$1 ${SCRUBBED}`],
  [/\bpdk_[A-Za-z0-9_-]{8,}/g, SCRUBBED],
  [/(\/\/[^/\s:@]+:)[^@\s/]+@/g, `$1${SCRUBBED}@`],
];

/** The scrubber of credentials by form (CREDENTIAL_FORMS). */
export function scrubCredentialForms(text: string): string {
  let out = text;
  for (const [pattern, replacement] of CREDENTIAL_FORMS) out = out.replace(pattern, replacement);
  return out;
}

/** A scrubber of fixed values (the deployment's own credentials): each occurrence replaced. */
export function valuesScrubber(values: Iterable<string | undefined>): Scrubber {
  const list = [...new Set([...values].filter((v): v is string => typeof v === 'string' && v.length >= 6))];
  // Longest first: a value containing another is replaced whole.
  list.sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const value of list) if (out.includes(value)) out = out.split(value).join(SCRUBBED);
    return out;
  };
}

const MAX_DEPTH = 24;

function scrubValue(value: unknown, scrub: Scrubber, depth: number): unknown {
  if (typeof value === 'string') return scrub(value);
  if (value === null || typeof value !== 'object' || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, scrub, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    out[scrub(key)] = CREDENTIAL_HEADERS.has(key.toLowerCase()) ? SCRUBBED : scrubValue(v, scrub, depth + 1);
  }
  return out;
}

/**
 * The event as it may leave the instance: the request keeps only its method and its URL without
 * the query string (headers that carry credentials, cookies, body and query dropped), breadcrumbs
 * are dropped, and every string left (messages, exception values, stack frames, tags, contexts)
 * passes through every scrubber.
 */
export function scrubEvent<E extends Event>(event: E, scrubbers: readonly Scrubber[]): E {
  const scrub: Scrubber = (text) => {
    let out = text;
    for (const s of scrubbers) out = s(out);
    return scrubCredentialForms(out);
  };
  const copy: Event = { ...event };
  delete copy.breadcrumbs;
  if (copy.request) {
    const { method, url, headers } = copy.request;
    const kept: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers ?? {})) {
      if (!CREDENTIAL_HEADERS.has(name.toLowerCase())) kept[name] = value;
    }
    copy.request = {
      ...(method ? { method } : {}),
      ...(url ? { url: url.split('?')[0] ?? url } : {}),
      ...(Object.keys(kept).length > 0 ? { headers: kept } : {}),
    };
  }
  return scrubValue(copy, scrub, 0) as E;
}

/**
 * Loads the Sentry SDK and starts reporting to `dsn`. `scrubbers` are applied to every event
 * (beside the credential forms, always applied); an event that cannot be scrubbed is dropped.
 */
export async function startErrorReports(options: {
  dsn: string;
  version: string;
  environment: string;
  scrubbers: readonly Scrubber[];
}): Promise<ErrorReportsHandle> {
  if (active) throw new Error('error reports are already started in this process');
  const sentry = await import('@sentry/node');
  const beforeSend = (event: ErrorEvent): ErrorEvent | null => {
    try {
      return scrubEvent(event, options.scrubbers);
    } catch {
      return null; // never sent unscrubbed
    }
  };
  sentry.init({
    dsn: options.dsn,
    release: `paddock-server@${options.version}`,
    environment: options.environment,
    // Ours is the only OpenTelemetry setup (tracing.ts); no performance data, no module hooks.
    enableOpenTelemetrySetup: false,
    enableRuntimeChannelInjection: false,
    defaultIntegrations: false,
    integrations: [
      sentry.linkedErrorsIntegration(),
      sentry.dedupeIntegration(),
      // `strict`: an unhandled rejection still ends the process, as it does without reports.
      sentry.onUnhandledRejectionIntegration({ mode: 'strict' }),
      sentry.onUncaughtExceptionIntegration(),
    ],
    // Nothing of a request is collected by the SDK itself (scrubEvent drops it again if it were).
    dataCollection: {
      userInfo: false,
      cookies: false,
      httpHeaders: false,
      httpBodies: [],
      urlQueryParams: false,
      databaseQueryData: false,
    },
    maxBreadcrumbs: 0,
    beforeBreadcrumb: () => null,
    beforeSend,
  });
  active = { sentry };
  return {
    flush: (timeoutMs = 5000) => sentry.flush(timeoutMs),
    stop: async () => {
      await sentry.close(5000);
      active = null;
    },
  };
}
