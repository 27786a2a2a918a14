// The HTTP client of the public API: bearer key, JSON, and one clear CliError for every
// failure (server unreachable, 401, 422 with field errors, anything else).
import { CliError, fieldErrorLines } from './errors.ts';

export interface ApiClient {
  readonly url: string;
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
}

export function createClient(options: { url: string; apiKey: string | null; timeoutMs?: number }): ApiClient {
  const { url, apiKey } = options;
  return {
    url,
    async request<T>(method: string, path: string, body?: unknown): Promise<T> {
      let res: Response;
      try {
        res = await fetch(`${url}${path}`, {
          method,
          headers: {
            accept: 'application/json',
            ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
        });
      } catch (err) {
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        const reason =
          (err as Error).name === 'TimeoutError'
            ? 'timed out'
            : (cause?.code ?? cause?.message ?? (err as Error).message);
        throw new CliError(`cannot reach the Paddock server at ${url} (${reason})`);
      }
      if (res.status === 204) return undefined as T;
      const text = await res.text();
      let parsed: unknown = null;
      try {
        parsed = text === '' ? null : JSON.parse(text);
      } catch {
        // not JSON: reported below by status
      }
      if (res.ok) return parsed as T;
      const errorBody = (parsed ?? {}) as { error?: string; message?: string; errors?: unknown };
      if (res.status === 401) {
        throw new CliError(
          apiKey
            ? 'the server refused the API key (401): run `paddock login` again or set PADDOCK_API_KEY'
            : 'not logged in: run `paddock login` or set PADDOCK_API_KEY',
        );
      }
      if (res.status === 422) {
        throw new CliError(errorBody.message ?? 'validation failed', fieldErrorLines(errorBody.errors));
      }
      if (res.status === 429) {
        throw new CliError(`rate limited: retry in ${res.headers.get('retry-after') ?? 'a few'} seconds`);
      }
      const message = errorBody.message ?? (res.statusText || 'request failed');
      throw new CliError(
        `${message} (HTTP ${res.status}${errorBody.error ? ` ${errorBody.error}` : ''})`,
        fieldErrorLines(errorBody.errors),
      );
    },
  };
}
