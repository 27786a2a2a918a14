import type { Readable } from 'node:stream';
import type WebSocket from 'ws';
import {
  messageOf,
  SandboxApiError,
  SandboxOperationError,
  SandboxProtocolError,
  SandboxTransportError,
} from './errors.ts';
import { createExecConnection, type ExecHandle, type ExecHandlers, openSocket } from './exec.ts';
import {
  apiError,
  type HttpRequest,
  type HttpTarget,
  mapFetchError,
  readBody,
  send,
  sendJson,
} from './http.ts';
import { readNdjson } from './ndjson.ts';
import { defaultRetryPolicy, isRetryable, type RetryPolicy, withRetry } from './retry.ts';
import type {
  CreateResult,
  ExecSessionInfo,
  NetworkPolicy,
  SandboxInfo,
  SandboxLogger,
  StreamEvent,
} from './types.ts';

export interface SandboxClientOptions {
  baseUrl: string;
  token: string;
  /** REST deadline per call (`SANDBOX_TIMEOUT_MS`). Default 30 s. */
  timeoutMs?: number;
  /** Deadline of one create call. Default 120 s. */
  createTimeoutMs?: number;
  /** Deadline for a WebSocket upgrade to complete. Default 10 s. */
  upgradeTimeoutMs?: number;
  /** Retries of the provisioning path. Default 3 attempts, 250 ms base, 10 s ceiling. */
  retryPolicy?: Partial<RetryPolicy>;
  logger?: SandboxLogger;
}

/**
 * Per-call options. `retry` puts the call on the provisioning path: 5xx, 429,
 * timeouts and transport errors are retried (3 attempts in all). Only
 * `create` retries unless asked; every other method retries only with
 * `{ retry: true }`. For exec, attach and execStream a retry repeats the
 * upgrade only: a command that started is never run twice. So a command's upgrade is
 * retried only when the backend refused it (5xx, 429) or no connection opened; a drop or a
 * deadline after the request may have reached the backend fails at once (it may be running).
 */
export interface CallOptions {
  retry?: boolean;
  /** Overrides the client's deadline for this call. */
  timeoutMs?: number;
}

export interface WriteFileOptions extends CallOptions {
  /** Permission bits, e.g. `0o755` or `'0755'`. */
  mode?: number | string;
  /** Resolves a relative `path`. Default `/`. */
  workingDir?: string;
  /** Creates missing parent directories. */
  mkdirParents?: boolean;
}

interface CommandOptions {
  /** argv; sent as one `cmd` query parameter per entry. */
  cmd: string[];
  env?: Record<string, string>;
  dir?: string;
  /**
   * `'root'`: run as the sandbox's root (uid 0 inside the sandbox), e.g. to install system packages. A
   * sandboxd extension of the interface (query parameter `user=root`); a backend that already runs commands
   * as root ignores it. Default: the backend's sandbox user.
   */
  user?: 'root';
  /** TTY mode: raw terminal bytes on stdout and JSON control frames. */
  tty?: boolean;
  /** Initial terminal size in TTY mode. Default 24 × 80. */
  rows?: number;
  cols?: number;
  /**
   * Client-side deadline from the completed upgrade to the exit (spec rule 2).
   * When it passes the socket is dropped and the call fails with `SandboxTimeoutError`.
   */
  timeoutMs?: number;
  /** Retries the upgrade on the provisioning path (see `CallOptions`). */
  retry?: boolean;
}

export interface ExecOptions extends CommandOptions {
  /** Sent then followed by stdin EOF. Without it the command runs with stdin closed (`stdin=false`). */
  stdin?: string | Uint8Array | Readable;
  /** Bytes kept per stream; the rest is counted, dropped and flagged as truncated. Default 16 MiB. */
  maxOutputBytes?: number;
  /**
   * Cancels the call: the socket is dropped (the backend ends the command, as for any plain exec whose
   * socket goes) and `exec` rejects with the signal's reason. An already aborted signal sends nothing.
   */
  signal?: AbortSignal;
}

export interface ExecResult {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

export interface ExecStreamOptions extends CommandOptions, ExecHandlers {
  /** Keeps the command running when the socket drops; it can be listed and attached to. */
  detachable?: boolean;
  /** Opens stdin for `handle.write()` / `handle.end()`. Always open in TTY mode. */
  stdin?: boolean;
}

export interface AttachOptions extends ExecHandlers {
  /** The session's mode; a `session_info` control message from the backend overrides it. */
  tty?: boolean;
  timeoutMs?: number;
  retry?: boolean;
}

export interface CheckpointOptions extends CallOptions {
  comment?: string;
  /** Each NDJSON line as it arrives. */
  onEvent?: (event: StreamEvent) => void;
}

export interface CheckpointResult {
  /** The new checkpoint's id, as the stream surfaced it. */
  id: string;
  events: StreamEvent[];
}

export interface ListOptions extends CallOptions {
  /** Only sandboxes whose name starts with it (sent as `prefix`, and enforced here too). */
  prefix?: string;
}

/**
 * The backend's runtime layer (sandboxd: the agent CLIs shared read-only by every sandbox, GET
 * /v1/runtime-layer). A backend without the route (a hosted one) has none: state `off`.
 */
export interface RuntimeLayerStatus {
  state: 'installing' | 'ready' | 'failed' | 'off';
  version: string | null;
  /** Inside a sandbox: the layer's bin directory (first on every exec's PATH). */
  bin: string | null;
  /** npm package name → pinned version */
  packages: Record<string, string>;
  progress: { step: number; steps: number; current: string; elapsed_ms: number } | null;
  error: string | null;
}

const NO_LAYER: RuntimeLayerStatus = {
  state: 'off',
  version: null,
  bin: null,
  packages: {},
  progress: null,
  error: null,
};

export interface SandboxClient {
  /** Creates a sandbox, or adopts it if the name exists. Retries by default (`retry: false` to opt out). */
  create(name: string, options?: CallOptions): Promise<CreateResult>;
  /** The sandbox, or `null` when the backend answers 404. */
  get(name: string, options?: CallOptions): Promise<SandboxInfo | null>;
  /** Destroys a sandbox; a 404 counts as success. */
  destroy(name: string, options?: CallOptions): Promise<void>;
  /** Every sandbox, following `continuation_token` until `has_more` is false. A failed page fails the call. */
  list(options?: ListOptions): Promise<SandboxInfo[]>;
  writeFile(
    name: string,
    path: string,
    content: string | Uint8Array,
    options?: WriteFileOptions,
  ): Promise<void>;
  /** Runs a command to its exit and returns its captured output. */
  exec(name: string, options: ExecOptions): Promise<ExecResult>;
  /** Starts a command and streams its output; resolves once the upgrade completes. */
  execStream(name: string, options: ExecStreamOptions): Promise<ExecHandle>;
  listSessions(name: string, options?: CallOptions): Promise<ExecSessionInfo[]>;
  /** Attaches to a session: the backend replays its output from the beginning, then tails. */
  attach(name: string, sessionId: string, options?: AttachOptions): Promise<ExecHandle>;
  /** Creates a checkpoint and returns its id. An `error` line in the stream fails the call. */
  createCheckpoint(name: string, options?: CheckpointOptions): Promise<CheckpointResult>;
  /** Restores a checkpoint. An `error` line in the stream fails the call even inside a 200. */
  restoreCheckpoint(
    name: string,
    checkpointId: string,
    options?: Omit<CheckpointOptions, 'comment'>,
  ): Promise<{ events: StreamEvent[] }>;
  /** Deletes a checkpoint of the sandbox; a 404 (unknown or already deleted) counts as success. */
  deleteCheckpoint(name: string, checkpointId: string, options?: CallOptions): Promise<void>;
  /** Sets the network policy. Success is 204 (200 tolerated). */
  setNetworkPolicy(name: string, policy: NetworkPolicy, options?: CallOptions): Promise<void>;
  /** The backend's runtime layer; `off` when the backend has none (404). Optional for test doubles. */
  runtimeLayer?(options?: CallOptions): Promise<RuntimeLayerStatus>;
}

const defaultMaxOutputBytes = 16 * 1024 * 1024;

export function createSandboxClient(options: SandboxClientOptions): SandboxClient {
  const target: HttpTarget = { baseUrl: new URL(options.baseUrl), token: options.token };
  const timeoutMs = options.timeoutMs ?? 30_000;
  const createTimeoutMs = options.createTimeoutMs ?? 120_000;
  const upgradeTimeoutMs = options.upgradeTimeoutMs ?? 10_000;
  const policy: RetryPolicy = { ...defaultRetryPolicy, ...options.retryPolicy };
  const logger = options.logger;

  const sandboxPath = (name: string): string => `/v1/sandboxes/${encodeURIComponent(name)}`;

  const call = <T>(operation: string, retry: boolean | undefined, run: () => Promise<T>): Promise<T> =>
    retry ? withRetry(operation, policy, run, logger) : run();

  const request = (
    operation: string,
    method: HttpRequest['method'],
    path: string,
    extra: Partial<HttpRequest> & { callTimeoutMs?: number | undefined } = {},
  ): HttpRequest => ({
    operation,
    method,
    path,
    timeoutMs: extra.callTimeoutMs ?? timeoutMs,
    ...(extra.query ? { query: extra.query } : {}),
    ...(extra.json !== undefined ? { json: extra.json } : {}),
    ...(extra.body !== undefined ? { body: extra.body } : {}),
  });

  async function get(name: string, callOptions: CallOptions = {}): Promise<SandboxInfo | null> {
    const req = request('get sandbox', 'GET', sandboxPath(name), { callTimeoutMs: callOptions.timeoutMs });
    return call(req.operation, callOptions.retry, async () => {
      const { response } = await send(target, req);
      if (response.status === 404) {
        await response.body?.cancel();
        return null;
      }
      if (!response.ok) throw await apiError(req, response);
      return toSandbox(req, await readBody(req, response), name);
    });
  }

  async function create(name: string, callOptions: CallOptions = {}): Promise<CreateResult> {
    const req = request('create sandbox', 'POST', '/v1/sandboxes', {
      json: { name },
      callTimeoutMs: callOptions.timeoutMs ?? createTimeoutMs,
    });
    return call(req.operation, callOptions.retry ?? true, async () => {
      const { response } = await send(target, req);
      if (response.ok)
        return { sandbox: toSandbox(req, await readBody(req, response), name), adopted: false };
      const error = await apiError(req, response);
      if (!isAlreadyExists(error)) throw error;
      const existing = await get(name, { timeoutMs: callOptions.timeoutMs });
      if (existing === null) throw error;
      logger?.debug?.({ sandbox: name, status: error.status }, 'sandbox already exists, adopted');
      return { sandbox: existing, adopted: true };
    });
  }

  async function listPage(
    req: HttpRequest,
    retry: boolean | undefined,
  ): Promise<{ sandboxes: SandboxInfo[]; hasMore: boolean; next: string | undefined }> {
    const body = await call(req.operation, retry, () => sendJson(target, req));
    if (
      body === null ||
      typeof body !== 'object' ||
      !Array.isArray((body as Record<string, unknown>)['sandboxes'])
    ) {
      throw new SandboxProtocolError(req.operation, 'the page has no `sandboxes` array', body);
    }
    const page = body as Record<string, unknown>;
    const sandboxes = (page['sandboxes'] as unknown[]).map((entry) => toSandbox(req, entry, undefined));
    const next = page['next_continuation_token'];
    return {
      sandboxes,
      hasMore: page['has_more'] === true,
      next: typeof next === 'string' && next.length > 0 ? next : undefined,
    };
  }

  async function list(listOptions: ListOptions = {}): Promise<SandboxInfo[]> {
    const all: SandboxInfo[] = [];
    const seenTokens = new Set<string>();
    let token: string | undefined;
    for (;;) {
      const query = new URLSearchParams();
      if (listOptions.prefix) query.set('prefix', listOptions.prefix);
      if (token !== undefined) query.set('continuation_token', token);
      const req = request('list sandboxes', 'GET', '/v1/sandboxes', {
        query,
        callTimeoutMs: listOptions.timeoutMs,
      });
      const page = await listPage(req, listOptions.retry);
      all.push(...page.sandboxes);
      if (!page.hasMore) break;
      if (page.next === undefined) {
        throw new SandboxProtocolError(
          req.operation,
          '`has_more` is true without a `next_continuation_token`',
        );
      }
      if (seenTokens.has(page.next)) {
        throw new SandboxProtocolError(req.operation, 'the continuation token repeats an earlier page');
      }
      seenTokens.add(page.next);
      token = page.next;
    }
    const prefix = listOptions.prefix;
    return prefix ? all.filter((sandbox) => sandbox.name.startsWith(prefix)) : all;
  }

  async function destroy(name: string, callOptions: CallOptions = {}): Promise<void> {
    const req = request('destroy sandbox', 'DELETE', sandboxPath(name), {
      callTimeoutMs: callOptions.timeoutMs,
    });
    await call(req.operation, callOptions.retry, async () => {
      const { response } = await send(target, req);
      if (response.status === 404 || response.ok) {
        await response.body?.cancel();
        return;
      }
      throw await apiError(req, response);
    });
  }

  async function writeFile(
    name: string,
    path: string,
    content: string | Uint8Array,
    writeOptions: WriteFileOptions = {},
  ): Promise<void> {
    const query = new URLSearchParams({ path, workingDir: writeOptions.workingDir ?? '/' });
    if (writeOptions.mode !== undefined) {
      const mode = writeOptions.mode;
      query.set('mode', typeof mode === 'number' ? mode.toString(8).padStart(4, '0') : mode);
    }
    if (writeOptions.mkdirParents !== undefined) query.set('mkdirParents', String(writeOptions.mkdirParents));
    const req = request('write file', 'PUT', `${sandboxPath(name)}/fs/write`, {
      query,
      body: typeof content === 'string' ? Buffer.from(content, 'utf8') : content,
      callTimeoutMs: writeOptions.timeoutMs,
    });
    await call(req.operation, writeOptions.retry, () => sendJson(target, req));
  }

  function commandQuery(command: CommandOptions, stdin: boolean, detachable: boolean): URLSearchParams {
    if (command.cmd.length === 0) throw new TypeError('exec: `cmd` needs at least one entry');
    const query = new URLSearchParams();
    for (const arg of command.cmd) query.append('cmd', arg);
    for (const [key, value] of Object.entries(command.env ?? {})) {
      if (key.length === 0 || key.includes('=')) throw new TypeError(`exec: invalid environment name ${key}`);
      query.append('env', `${key}=${value}`);
    }
    query.set('stdin', String(stdin || command.tty === true));
    if (command.dir !== undefined) query.set('dir', command.dir);
    if (command.user === 'root') query.set('user', 'root');
    if (command.tty) {
      query.set('tty', 'true');
      query.set('rows', String(command.rows ?? 24));
      query.set('cols', String(command.cols ?? 80));
    }
    if (detachable) query.set('detachable', 'true');
    return query;
  }

  function connect(
    operation: string,
    path: string,
    query: URLSearchParams,
    handlers: ExecHandlers,
    connection: {
      tty: boolean;
      timeoutMs?: number | undefined;
      retry?: boolean | undefined;
      /** Starts a command (exec), as opposed to joining a running session (attach). */
      command: boolean;
    },
  ): Promise<ExecHandle> {
    // A command's upgrade is tried again only when the backend surely did not start it: it refused
    // the upgrade (a 5xx or 429 answer), or no connection ever opened. A drop or a deadline once the
    // request may have reached the backend is not retried: the command may be running already, and
    // a retry would run it twice (a setup script, a clone). An attach starts nothing: retried as any call.
    let connected = false;
    const retryable = (error: unknown): boolean =>
      isRetryable(error) && (!connection.command || !connected || error instanceof SandboxApiError);
    const run = async (): Promise<ExecHandle> => {
      connected = false;
      let handle: ExecHandle | undefined;
      const attachHandlers = (socket: WebSocket): void => {
        handle = createExecConnection(socket, handlers, {
          tty: connection.tty,
          operation,
          timeoutMs: connection.timeoutMs,
          logger,
        });
      };
      await openSocket(
        target,
        {
          operation,
          path,
          query,
          upgradeTimeoutMs,
          onConnected: () => {
            connected = true;
          },
        },
        attachHandlers,
      );
      if (handle === undefined) throw new Error('unreachable: the exec socket opened without handlers');
      return handle;
    };
    return connection.retry ? withRetry(operation, policy, run, logger, retryable) : run();
  }

  async function exec(name: string, execOptions: ExecOptions): Promise<ExecResult> {
    const { signal } = execOptions;
    signal?.throwIfAborted();
    const limit = execOptions.maxOutputBytes ?? defaultMaxOutputBytes;
    const stdout = boundedSink(limit);
    const stderr = boundedSink(limit);
    const stdin = execOptions.stdin;
    const handle = await connect(
      'exec',
      `${sandboxPath(name)}/exec`,
      commandQuery(execOptions, stdin !== undefined, false),
      { onStdout: stdout.push, onStderr: stderr.push },
      {
        tty: execOptions.tty === true,
        timeoutMs: execOptions.timeoutMs,
        retry: execOptions.retry,
        command: true,
      },
    );
    // Aborted during the upgrade, or later: the socket goes at once (a closing handshake would wait
    // behind the output still in flight), and with it the command.
    const cancel = () => handle.terminate();
    if (signal?.aborted) cancel();
    else signal?.addEventListener('abort', cancel, { once: true });
    let result: ExecResult;
    try {
      result = await collect(handle, stdin, stdout, stderr);
    } catch (error) {
      signal?.throwIfAborted();
      throw error;
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
    signal?.throwIfAborted();
    return result;
  }

  async function collect(
    handle: ExecHandle,
    stdin: ExecOptions['stdin'],
    stdout: BoundedSink,
    stderr: BoundedSink,
  ): Promise<ExecResult> {
    let stdinFailure: unknown;
    if (stdin !== undefined) {
      pumpStdin(handle, stdin).catch((error: unknown) => {
        if (error instanceof SandboxTransportError) {
          // The command may exit without reading all its stdin: the socket is then closed under the pump.
          logger?.debug?.(
            { operation: 'exec', error: error.message },
            'sandbox exec: stdin not fully delivered',
          );
          return;
        }
        // The caller's stream failed: stop the command rather than let it see a truncated stdin as EOF.
        stdinFailure = error;
        handle.close();
      });
    }
    const exitCode = await handle.exited;
    if (stdinFailure !== undefined) throw stdinFailure;
    return {
      exitCode,
      stdout: stdout.result(),
      stderr: stderr.result(),
      stdoutTruncated: stdout.truncated(),
      stderrTruncated: stderr.truncated(),
    };
  }

  function execStream(name: string, streamOptions: ExecStreamOptions): Promise<ExecHandle> {
    return connect(
      streamOptions.detachable ? 'exec (detachable)' : 'exec (stream)',
      `${sandboxPath(name)}/exec`,
      commandQuery(streamOptions, streamOptions.stdin === true, streamOptions.detachable === true),
      streamOptions,
      {
        tty: streamOptions.tty === true,
        timeoutMs: streamOptions.timeoutMs,
        retry: streamOptions.retry,
        command: true,
      },
    );
  }

  function attach(name: string, sessionId: string, attachOptions: AttachOptions = {}): Promise<ExecHandle> {
    return connect(
      'attach',
      `${sandboxPath(name)}/exec/${encodeURIComponent(sessionId)}`,
      new URLSearchParams(),
      attachOptions,
      {
        tty: attachOptions.tty === true,
        timeoutMs: attachOptions.timeoutMs,
        retry: attachOptions.retry,
        command: false,
      },
    );
  }

  async function listSessions(name: string, callOptions: CallOptions = {}): Promise<ExecSessionInfo[]> {
    const req = request('list sessions', 'GET', `${sandboxPath(name)}/exec`, {
      callTimeoutMs: callOptions.timeoutMs,
    });
    const body = await call(req.operation, callOptions.retry, () => sendJson(target, req));
    const sessions =
      body !== null && typeof body === 'object' ? (body as Record<string, unknown>)['sessions'] : null;
    if (!Array.isArray(sessions)) throw new SandboxProtocolError(req.operation, 'no `sessions` array', body);
    return sessions.map((session: unknown) => {
      if (session === null || typeof session !== 'object') {
        throw new SandboxProtocolError(req.operation, 'a session is not an object', session);
      }
      const record = session as Record<string, unknown>;
      const id = record['id'];
      if (typeof id !== 'string' && typeof id !== 'number') {
        throw new SandboxProtocolError(req.operation, 'a session has no `id`', session);
      }
      return { ...record, id: String(id) } as ExecSessionInfo;
    });
  }

  async function streamEvents(
    req: HttpRequest,
    retry: boolean | undefined,
    onEvent: ((event: StreamEvent) => void) | undefined,
  ): Promise<StreamEvent[]> {
    return call(req.operation, retry, async () => {
      const { response } = await send(target, req);
      if (!response.ok) throw await apiError(req, response);
      const events: StreamEvent[] = [];
      if (!response.body) return events;
      try {
        for await (const line of readNdjson(response.body)) {
          const event = line as StreamEvent;
          events.push(event);
          onEvent?.(event);
          if (event.type === 'error') throw new SandboxOperationError(req.operation, event);
        }
      } catch (error) {
        throw mapFetchError(req, error);
      }
      return events;
    });
  }

  async function createCheckpoint(
    name: string,
    checkpointOptions: CheckpointOptions = {},
  ): Promise<CheckpointResult> {
    const req = request('create checkpoint', 'POST', `${sandboxPath(name)}/checkpoint`, {
      json: checkpointOptions.comment === undefined ? {} : { comment: checkpointOptions.comment },
      callTimeoutMs: checkpointOptions.timeoutMs,
    });
    const events = await streamEvents(req, checkpointOptions.retry, checkpointOptions.onEvent);
    const id = checkpointIdOf(events);
    if (id === undefined)
      throw new SandboxProtocolError(req.operation, 'the stream named no checkpoint id', events);
    return { id, events };
  }

  async function restoreCheckpoint(
    name: string,
    checkpointId: string,
    restoreOptions: Omit<CheckpointOptions, 'comment'> = {},
  ): Promise<{ events: StreamEvent[] }> {
    const req = request(
      'restore checkpoint',
      'POST',
      `${sandboxPath(name)}/checkpoints/${encodeURIComponent(checkpointId)}/restore`,
      { callTimeoutMs: restoreOptions.timeoutMs },
    );
    return { events: await streamEvents(req, restoreOptions.retry, restoreOptions.onEvent) };
  }

  async function deleteCheckpoint(name: string, checkpointId: string, callOptions: CallOptions = {}) {
    const req = request(
      'delete checkpoint',
      'DELETE',
      `${sandboxPath(name)}/checkpoints/${encodeURIComponent(checkpointId)}`,
      { callTimeoutMs: callOptions.timeoutMs },
    );
    await call(req.operation, callOptions.retry, async () => {
      const { response } = await send(target, req);
      if (response.status === 404 || response.ok) {
        await response.body?.cancel();
        return;
      }
      throw await apiError(req, response);
    });
  }

  async function setNetworkPolicy(name: string, networkPolicy: NetworkPolicy, callOptions: CallOptions = {}) {
    const req = request('set network policy', 'POST', `${sandboxPath(name)}/policy/network`, {
      json: networkPolicy,
      callTimeoutMs: callOptions.timeoutMs,
    });
    await call(req.operation, callOptions.retry, async () => {
      const { response } = await send(target, req);
      if (response.status === 204 || response.status === 200) {
        await response.body?.cancel();
        return;
      }
      if (response.ok) {
        await response.body?.cancel();
        throw new SandboxProtocolError(req.operation, `success is 204, got ${response.status}`);
      }
      throw await apiError(req, response);
    });
  }

  async function runtimeLayer(callOptions: CallOptions = {}): Promise<RuntimeLayerStatus> {
    const req = request('get runtime layer', 'GET', '/v1/runtime-layer', {
      callTimeoutMs: callOptions.timeoutMs,
    });
    return call(req.operation, callOptions.retry, async () => {
      const { response } = await send(target, req);
      if (response.status === 404) {
        await response.body?.cancel();
        return NO_LAYER;
      }
      if (!response.ok) throw await apiError(req, response);
      const body = await readBody(req, response);
      const state = (body as Record<string, unknown> | null)?.['state'];
      if (state !== 'installing' && state !== 'ready' && state !== 'failed' && state !== 'off')
        throw new SandboxProtocolError(req.operation, 'the runtime layer has no known `state`', body);
      return { ...NO_LAYER, ...(body as Partial<RuntimeLayerStatus>), state };
    });
  }

  return {
    runtimeLayer,
    create,
    get,
    destroy,
    list,
    writeFile,
    exec,
    execStream,
    listSessions,
    attach,
    createCheckpoint,
    restoreCheckpoint,
    deleteCheckpoint,
    setNetworkPolicy,
  };
}

/** 409, or a 400 whose message says the name exists (the hosted reference backend's answer). */
function isAlreadyExists(error: SandboxApiError): boolean {
  if (error.status === 409) return true;
  if (error.status !== 400) return false;
  const text =
    typeof error.body === 'string' ? error.body : `${messageOf(error.body)} ${JSON.stringify(error.body)}`;
  return /already exists/i.test(text);
}

function toSandbox(req: HttpRequest, body: unknown, fallbackName: string | undefined): SandboxInfo {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const record = body as Record<string, unknown>;
    const name = record['name'] ?? fallbackName;
    if (typeof name === 'string') return { ...record, name } as SandboxInfo;
  }
  if (fallbackName !== undefined && (body === undefined || typeof body === 'string'))
    return { name: fallbackName };
  throw new SandboxProtocolError(req.operation, 'a sandbox has no `name`', body);
}

/**
 * The id of a new checkpoint: an `id`/`checkpoint_id` field on any line
 * (or a nested `checkpoint.id`), else the reference backend's completion text
 * ("Checkpoint v3 created …"). The last line that names one wins.
 */
export function checkpointIdOf(events: StreamEvent[]): string | undefined {
  let found: string | undefined;
  for (const event of events) {
    const nested = event['checkpoint'];
    const candidates = [
      event['checkpoint_id'],
      event['checkpointId'],
      event['id'],
      nested !== null && typeof nested === 'object' ? (nested as Record<string, unknown>)['id'] : undefined,
    ];
    const direct = candidates.find((value) => typeof value === 'string' || typeof value === 'number');
    if (direct !== undefined) {
      found = String(direct);
      continue;
    }
    if (typeof event.data === 'string') {
      const match = /checkpoint\s+(\S+)\s+created/i.exec(event.data);
      if (match?.[1]) found = match[1];
    }
  }
  return found;
}

interface BoundedSink {
  push: (chunk: Buffer) => void;
  result: () => Buffer;
  truncated: () => boolean;
}

/** Keeps the first `limit` bytes as views of the received frames; copies once, at the end. */
function boundedSink(limit: number): BoundedSink {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = false;
  return {
    push(chunk) {
      const room = limit - kept;
      if (room <= 0) {
        dropped ||= chunk.length > 0;
        return;
      }
      const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
      if (piece.length < chunk.length) dropped = true;
      chunks.push(piece);
      kept += piece.length;
    },
    result: () => (chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, kept)),
    truncated: () => dropped,
  };
}

async function pumpStdin(handle: ExecHandle, stdin: string | Uint8Array | Readable): Promise<void> {
  if (typeof stdin === 'string' || stdin instanceof Uint8Array) {
    await handle.write(stdin);
  } else {
    for await (const chunk of stdin) {
      await handle.write(typeof chunk === 'string' ? chunk : (chunk as Uint8Array));
    }
  }
  await handle.end();
}
