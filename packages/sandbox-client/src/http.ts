import {
  SandboxApiError,
  SandboxOperationError,
  SandboxProtocolError,
  SandboxTimeoutError,
  SandboxTransportError,
} from './errors.ts';

/** What every REST call shares: where the backend is and how to authenticate. */
export interface HttpTarget {
  baseUrl: URL;
  token: string;
}

export interface HttpRequest {
  /** Names the call in errors and logs, e.g. `create sandbox`. */
  operation: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: URLSearchParams;
  json?: unknown;
  body?: Uint8Array;
  timeoutMs: number;
}

/**
 * A started call. `signal` is the call's deadline: it also bounds reading the
 * body, so a stream (NDJSON) cannot outlive the call's timeout.
 */
export interface HttpResponse {
  response: Response;
  signal: AbortSignal;
}

export function buildUrl(target: HttpTarget, path: string, query?: URLSearchParams): URL {
  const url = new URL(target.baseUrl.href.replace(/\/+$/, '') + path);
  if (query) url.search = query.toString();
  return url;
}

export async function send(target: HttpTarget, request: HttpRequest): Promise<HttpResponse> {
  const signal = AbortSignal.timeout(request.timeoutMs);
  const headers: Record<string, string> = { authorization: `Bearer ${target.token}` };
  let body: Uint8Array | string | undefined;
  if (request.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(request.json);
  } else if (request.body !== undefined) {
    headers['content-type'] = 'application/octet-stream';
    body = request.body;
  }
  try {
    const response = await fetch(buildUrl(target, request.path, request.query), {
      method: request.method,
      headers,
      body,
      signal,
    });
    return { response, signal };
  } catch (error) {
    throw mapFetchError(request, error);
  }
}

/** Turns an abort or a network failure into the client's error classes. */
export function mapFetchError(request: Pick<HttpRequest, 'operation' | 'timeoutMs'>, error: unknown): Error {
  if (error instanceof DOMException && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return new SandboxTimeoutError(request.operation, request.timeoutMs);
  }
  if (
    error instanceof SandboxApiError ||
    error instanceof SandboxProtocolError ||
    error instanceof SandboxOperationError ||
    error instanceof SandboxTimeoutError ||
    error instanceof SandboxTransportError
  ) {
    return error;
  }
  return new SandboxTransportError(request.operation, error);
}

export async function readBody(request: HttpRequest, response: Response): Promise<unknown> {
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    throw mapFetchError(request, error);
  }
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Reads the body of a non-2xx answer and builds the error that carries it. */
export async function apiError(request: HttpRequest, response: Response): Promise<SandboxApiError> {
  const body = await readBody(request, response);
  return new SandboxApiError(request.operation, response.status, body, {
    retryAfterSeconds: retryAfterSeconds(response.headers, body),
  });
}

/** `retry_after_seconds` in the body wins over the `Retry-After` header (seconds or an HTTP date). */
export function retryAfterSeconds(headers: Headers, body: unknown): number | undefined {
  if (body !== null && typeof body === 'object') {
    const value = (body as Record<string, unknown>)['retry_after_seconds'];
    const seconds = typeof value === 'string' ? Number(value) : value;
    if (typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0) return seconds;
  }
  const header = headers.get('retry-after');
  if (header === null) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(header)) return Number(header);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000);
}

/** Sends a call and returns its decoded body; a non-2xx answer throws `SandboxApiError`. */
export async function sendJson(target: HttpTarget, request: HttpRequest): Promise<unknown> {
  const { response } = await send(target, request);
  if (!response.ok) throw await apiError(request, response);
  return readBody(request, response);
}
