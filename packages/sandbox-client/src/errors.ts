/**
 * Errors raised by the sandbox client. Every message is built from the method,
 * the path and the decoded response: the bearer token never appears in one.
 */

/** A non-2xx answer from the backend (REST call or refused WebSocket upgrade). */
export class SandboxApiError extends Error {
  readonly status: number;
  /** The decoded response body: parsed JSON when it parses, else the text. */
  readonly body: unknown;
  /** The machine code of the body (`error`, `code` or `type` field), when there is one. */
  readonly code: string | undefined;
  /** Seconds to wait before retrying, from `retry_after_seconds` or `Retry-After`. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    operation: string,
    status: number,
    body: unknown,
    options: { retryAfterSeconds?: number | undefined; cause?: unknown } = {},
  ) {
    const code = codeOf(body);
    const detail = messageOf(body);
    super(
      `sandbox backend: ${operation} answered ${status}` +
        (code ? ` ${code}` : '') +
        (detail ? `: ${detail}` : ''),
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = 'SandboxApiError';
    this.status = status;
    this.body = body;
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** A call that did not finish within its deadline (REST timeout, upgrade timeout, exec timeout). */
export class SandboxTimeoutError extends Error {
  readonly timeoutMs: number;
  constructor(operation: string, timeoutMs: number) {
    super(`sandbox backend: ${operation} timed out after ${timeoutMs} ms`);
    this.name = 'SandboxTimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

/** The connection failed before an answer arrived (refused, reset, DNS, TLS). */
export class SandboxTransportError extends Error {
  constructor(operation: string, cause: unknown) {
    super(`sandbox backend: ${operation} failed: ${describe(cause)}`, { cause });
    this.name = 'SandboxTransportError';
  }
}

/** The backend answered 2xx but broke the protocol (a body of the wrong shape, a looping page token). */
export class SandboxProtocolError extends Error {
  readonly detail: unknown;
  constructor(operation: string, message: string, detail?: unknown) {
    super(`sandbox backend: ${operation}: ${message}`);
    this.name = 'SandboxProtocolError';
    this.detail = detail;
  }
}

function codeOf(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const record = body as Record<string, unknown>;
  for (const key of ['error', 'code', 'type']) {
    const value = record[key];
    if (typeof value === 'string' && /^[A-Za-z0-9_.:-]{1,100}$/.test(value)) return value;
  }
  return undefined;
}

/** Human text of an error body, cut short so a huge body cannot flood logs. */
export function messageOf(body: unknown): string {
  let text: string;
  if (typeof body === 'string') text = body;
  else if (body !== null && typeof body === 'object') {
    const record = body as Record<string, unknown>;
    const message = record['message'] ?? record['error'] ?? record['detail'];
    text = typeof message === 'string' ? message : JSON.stringify(body);
  } else text = body === undefined ? '' : String(body);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code;
    const inner = cause.cause instanceof Error ? ` (${describe(cause.cause)})` : '';
    return `${code ? `${code} ` : ''}${cause.message}${inner}`;
  }
  return String(cause);
}

/** A 2xx streaming operation (checkpoint, restore) whose NDJSON stream reported an `error` line. */
export class SandboxOperationError extends Error {
  /** The `error` line as decoded. */
  readonly event: Record<string, unknown>;
  constructor(operation: string, event: Record<string, unknown>) {
    super(`sandbox backend: ${operation} failed: ${messageOf(event)}`);
    this.name = 'SandboxOperationError';
    this.event = event;
  }
}
