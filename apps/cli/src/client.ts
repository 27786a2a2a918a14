// The HTTP client of the public API: bearer key, JSON, and one clear error for every failure
// (server unreachable, 401, 422 with field errors, anything else). Every request says it comes
// from the CLI (`X-Paddock-Client: cli`): conversations it starts get `source: cli`.
import { ApiError, CliError, fieldErrorLines } from './errors.ts';

export interface ApiClient {
  readonly url: string;
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
  /**
   * Opens a long-lived GET (the SSE stream) and returns the response once its status is 2xx;
   * refusals throw like request(). The caller reads and cancels the body.
   */
  open(path: string, options: { headers?: Record<string, string>; signal: AbortSignal }): Promise<Response>;
}

export function createClient(options: { url: string; apiKey: string | null; timeoutMs?: number }): ApiClient {
  const { url, apiKey } = options;
  const baseHeaders = {
    'x-paddock-client': 'cli',
    ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
  };

  async function send(path: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(`${url}${path}`, init);
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const reason =
        (err as Error).name === 'TimeoutError'
          ? 'timed out'
          : (cause?.code ?? cause?.message ?? (err as Error).message);
      throw new CliError(`cannot reach the Paddock server at ${url} (${reason})`);
    }
  }

  function refusal(res: Response, text: string): ApiError {
    let parsed: unknown = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      // not JSON: reported below by status
    }
    const body = (parsed ?? {}) as { error?: string; message?: string; errors?: unknown };
    const header = res.headers.get('retry-after');
    const retryAfter = header === null || header.trim() === '' ? Number.NaN : Number(header);
    const meta = {
      status: res.status,
      code: body.error ?? null,
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : null,
      serverMessage: typeof body.message === 'string' ? body.message : null,
    };
    if (res.status === 401) {
      return new ApiError(
        apiKey
          ? 'the server refused the API key (401): run `paddock login` again or set PADDOCK_API_KEY'
          : 'not logged in: run `paddock login` or set PADDOCK_API_KEY',
        meta,
      );
    }
    if (res.status === 422) {
      return new ApiError(body.message ?? 'validation failed', meta, fieldErrorLines(body.errors));
    }
    if (res.status === 429 && (body.error === undefined || body.error === 'rate_limited')) {
      return new ApiError(
        `rate limited: retry in ${res.headers.get('retry-after') ?? 'a few'} seconds`,
        meta,
      );
    }
    const message = body.message ?? (res.statusText || 'request failed');
    return new ApiError(
      `${message} (HTTP ${res.status}${body.error ? ` ${body.error}` : ''})`,
      meta,
      fieldErrorLines(body.errors),
    );
  }

  return {
    url,
    async request<T>(method: string, path: string, body?: unknown): Promise<T> {
      const res = await send(path, {
        method,
        headers: {
          accept: 'application/json',
          ...baseHeaders,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
      });
      if (res.status === 204) return undefined as T;
      const text = await res.text();
      if (!res.ok) throw refusal(res, text);
      return (text === '' ? null : JSON.parse(text)) as T;
    },
    async open(path, { headers = {}, signal }) {
      const res = await send(path, {
        method: 'GET',
        headers: { accept: 'text/event-stream', ...baseHeaders, ...headers },
        signal,
      });
      if (res.ok) return res;
      throw refusal(res, await res.text());
    },
  };
}
