// The console's one way to the API: typed by the generated schema (schema.d.ts, from the
// server's OpenAPI document), authenticated by the session cookie. CSRF: the server refuses
// a cookie-authenticated unsafe request unless its Origin is the server's own
// (apps/server/src/auth/csrf.ts); browsers send Origin on every same-origin fetch that is
// not GET/HEAD, so the wrapper only has to stay same-origin and never send credentials
// anywhere else. Errors come back as ApiError carrying the API's `{error, message}` body.
import type { paths } from './schema';

type Method = 'get' | 'post' | 'put' | 'delete';
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

/** The paths that have an operation for `M`. */
export type PathsWith<M extends Method> = {
  [P in keyof paths]: paths[P][M] extends undefined | never ? never : P;
}[keyof paths];

type Params<O> = O extends { parameters: infer Ps } ? Ps : never;
type PathParams<O> =
  Params<O> extends { path: infer X } ? (X extends Record<string, unknown> ? X : never) : never;
type QueryParams<O> =
  Params<O> extends { query?: infer Q } ? ([NonNullable<Q>] extends [never] ? never : NonNullable<Q>) : never;
type Body<O> = O extends { requestBody?: infer RB }
  ? [NonNullable<RB>] extends [never]
    ? never
    : NonNullable<RB> extends { content: { 'application/json': infer B } }
      ? B
      : never
  : never;
type SuccessOf<R> = R extends { 200: infer X }
  ? X
  : R extends { 201: infer X }
    ? X
    : R extends { 202: infer X }
      ? X
      : R extends { 204: unknown }
        ? { content: { 'application/json': null } }
        : never;
/** The JSON of the operation's success response (200, 201, 202; null for 204). */
export type Success<O> = O extends { responses: infer R }
  ? SuccessOf<R> extends { content: { 'application/json': infer J } }
    ? J
    : null
  : never;

type Options<O> = ([PathParams<O>] extends [never] ? { path?: undefined } : { path: PathParams<O> }) &
  ([QueryParams<O>] extends [never] ? { query?: undefined } : { query?: QueryParams<O> }) &
  ([Body<O>] extends [never] ? { body?: undefined } : { body: Body<O> }) & { signal?: AbortSignal };

/** The response type of `GET path`, for components that hold API data. */
export type ApiData<P extends PathsWith<'get'>> = Success<Operation<P, 'get'>>;

export interface ErrorBody {
  error: string;
  message: string;
  errors?: Record<string, string[]>;
  [extra: string]: unknown;
}

export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody;
  constructor(status: number, body: ErrorBody) {
    super(body.message);
    this.name = 'ApiError';
    this.status = status;
    this.body = body;
  }
  get code(): string {
    return this.body.error;
  }
}

/** Substitutes `{name}` segments; every value is encoded as one path segment. */
export function fillPath(path: string, params: Record<string, unknown> | undefined): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params?.[name];
    if (value === undefined) throw new Error(`missing path parameter ${name} for ${path}`);
    return encodeURIComponent(String(value));
  });
}

function queryString(query: Record<string, unknown> | undefined): string {
  if (!query) return '';
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query))
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Listeners told when any call answers 401 (the session ended elsewhere). */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

async function call(method: Method, path: string, options: Record<string, unknown>): Promise<unknown> {
  const url =
    fillPath(path, options['path'] as Record<string, unknown> | undefined) +
    queryString(options['query'] as Record<string, unknown> | undefined);
  const hasBody = options['body'] !== undefined;
  let res: Response;
  try {
    res = await fetch(url, {
      method: method.toUpperCase(),
      credentials: 'same-origin',
      headers: { accept: 'application/json', ...(hasBody ? { 'content-type': 'application/json' } : {}) },
      ...(hasBody ? { body: JSON.stringify(options['body']) } : {}),
      ...(options['signal'] ? { signal: options['signal'] as AbortSignal } : {}),
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === 'AbortError') throw err;
    throw new ApiError(0, {
      error: 'network_error',
      message: 'The server could not be reached. Check your connection.',
    });
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const body =
      json && typeof json === 'object' && typeof (json as ErrorBody).error === 'string'
        ? (json as ErrorBody)
        : { error: 'http_error', message: `The server answered ${res.status}.` };
    if (res.status === 401) for (const l of unauthorizedListeners) l();
    throw new ApiError(res.status, body);
  }
  return json;
}

export const api = {
  get<P extends PathsWith<'get'>>(path: P, ...[options]: OptionalIfEmpty<Options<Operation<P, 'get'>>>) {
    return call('get', path, options ?? {}) as Promise<Success<Operation<P, 'get'>>>;
  },
  post<P extends PathsWith<'post'>>(path: P, ...[options]: OptionalIfEmpty<Options<Operation<P, 'post'>>>) {
    return call('post', path, options ?? {}) as Promise<Success<Operation<P, 'post'>>>;
  },
  put<P extends PathsWith<'put'>>(path: P, ...[options]: OptionalIfEmpty<Options<Operation<P, 'put'>>>) {
    return call('put', path, options ?? {}) as Promise<Success<Operation<P, 'put'>>>;
  },
  delete<P extends PathsWith<'delete'>>(
    path: P,
    ...[options]: OptionalIfEmpty<Options<Operation<P, 'delete'>>>
  ) {
    return call('delete', path, options ?? {}) as Promise<Success<Operation<P, 'delete'>>>;
  },
};

/** Options may be left out when nothing in them is required. */
type OptionalIfEmpty<T> = Partial<T> extends T ? [options?: T] : [options: T];

/** A human sentence for any error a call threw. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return err.body.message;
  if (err instanceof Error) return err.message;
  return 'Something went wrong.';
}
