import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { SandboxApiError, SandboxTimeoutError, SandboxTransportError } from './errors.ts';
import { buildUrl, type HttpTarget, retryAfterSeconds } from './http.ts';
import type { SandboxLogger } from './types.ts';

/**
 * The exec WebSocket (spec, outbound interface). Without a TTY every binary
 * frame starts with a stream id; with a TTY binary frames are raw terminal
 * bytes. In both modes a text frame is a JSON control message.
 *
 * Invariants (proved in test/client.test.ts):
 * - an exit frame carries a 4-byte big-endian code, or a 1-byte code as the
 *   hosted reference backend sends;
 * - a close without an exit frame (or exit control message) is exit 0 (rule 1);
 * - received payloads are handed out as views of the frame (`subarray`), never copied.
 */
export const StreamId = {
  stdin: 0,
  stdout: 1,
  stderr: 2,
  exit: 3,
  stdinEof: 4,
} as const;

/** Largest stdin payload put in one frame; a bigger write is split. */
const maxStdinFrame = 1024 * 1024;

export interface ExecHandlers {
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
  /** JSON text frames other than the exit message (`session_info`, `port_opened`, …). */
  onControl?: (message: Record<string, unknown>) => void;
}

/** A live exec or attach connection. */
export interface ExecHandle {
  /** The session id, once the backend has named it (a `session_info` control message). */
  readonly sessionId: string | undefined;
  /** Whether the connection is in TTY mode (raw bytes, no stream-id prefix). */
  readonly tty: boolean;
  /** Sends stdin bytes; resolves when they are handed to the socket. */
  write(data: string | Uint8Array): Promise<void>;
  /** Sends stdin EOF (frame 4). A TTY has no EOF frame: send `\x04` through `write` instead. */
  end(): Promise<void>;
  /** TTY only: sends a `resize` control message. */
  resize(cols: number, rows: number): void;
  /**
   * Stops reading the socket (backpressure): no handler is called until `resume`, and the
   * backend's sends wait behind the connection's flow control. For a reader that forwards the
   * output to a slower consumer (a download, a terminal in a browser).
   */
  pause(): void;
  /** Reads the socket again after `pause`. */
  resume(): void;
  /**
   * Drops the connection. A detached session keeps running on the backend;
   * a plain exec is ended by the backend. `exited` then settles as a close
   * without an exit frame does.
   */
  close(): void;
  /**
   * Drops the socket at once, without the closing handshake (which waits behind output still in
   * flight): the backend sees the connection gone immediately. Otherwise as `close`.
   */
  terminate(): void;
  /**
   * The exit code. Rejects only with `SandboxTimeoutError` when the call's
   * `timeoutMs` passes first (the socket is then dropped).
   */
  readonly exited: Promise<number>;
}

export interface OpenSocketOptions {
  operation: string;
  path: string;
  query: URLSearchParams;
  /** Deadline for the upgrade to complete (spec: 10 s). */
  upgradeTimeoutMs: number;
  /**
   * Called once the connection to the backend is open, i.e. the upgrade request may have reached
   * it: a failure after that may have left the command started on the backend (a lost answer).
   */
  onConnected?: () => void;
}

/**
 * Opens the WebSocket with the bearer token on the upgrade request. Settles
 * when the upgrade completes: a refused upgrade becomes `SandboxApiError`
 * with the decoded body, a missed deadline `SandboxTimeoutError`, anything
 * else `SandboxTransportError`. `attach` runs before any frame can arrive, so
 * no frame is lost between the upgrade and the caller's handlers.
 */
export function openSocket(
  target: HttpTarget,
  options: OpenSocketOptions,
  attach: (socket: WebSocket) => void,
): Promise<WebSocket> {
  const url = buildUrl(target, options.path, options.query);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${target.token}` },
      perMessageDeflate: false,
      finishRequest: (request) => {
        const onConnected = options.onConnected;
        if (onConnected)
          request.once('socket', (raw) => {
            if (raw.connecting) raw.once('connect', onConnected);
            else onConnected();
          });
        request.end();
      },
    });
    let settled = false;
    const fail = (error: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.terminate();
      reject(error);
    };
    const timer = setTimeout(
      () => fail(new SandboxTimeoutError(`${options.operation} (upgrade)`, options.upgradeTimeoutMs)),
      options.upgradeTimeoutMs,
    );
    attach(socket);
    socket.once('open', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('unexpected-response', (_request, response: IncomingMessage) => {
      readRefusal(options.operation, response).then(fail, fail);
    });
    socket.on('error', (error) => fail(new SandboxTransportError(options.operation, error)));
  });
}

async function readRefusal(operation: string, response: IncomingMessage): Promise<SandboxApiError> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response) {
    const buffer = chunk as Buffer;
    if (size < 64 * 1024) chunks.push(buffer);
    size += buffer.length;
  }
  const text = Buffer.concat(chunks).toString('utf8');
  let body: unknown = text.length === 0 ? undefined : text;
  try {
    if (text.length > 0) body = JSON.parse(text) as unknown;
  } catch {
    // Not JSON: keep the text.
  }
  const headers = new Headers();
  const retryAfter = response.headers['retry-after'];
  if (typeof retryAfter === 'string') headers.set('retry-after', retryAfter);
  return new SandboxApiError(operation, response.statusCode ?? 0, body, {
    retryAfterSeconds: retryAfterSeconds(headers, body),
  });
}

/** Reads the exit code of an exit frame payload: 4 bytes big-endian, or fewer (1 byte on the reference backend). */
export function decodeExitCode(payload: Buffer): number {
  if (payload.length === 0) return 0;
  if (payload.length >= 4) return payload.readInt32BE(0);
  return payload.readUIntBE(0, payload.length);
}

function exitCodeOfControl(message: Record<string, unknown>): number {
  const value = message['exit_code'] ?? message['code'] ?? message['status'];
  return typeof value === 'number' && Number.isInteger(value) ? value : 0;
}

/**
 * Wires a socket to handlers and builds its handle. Must be called from
 * `openSocket`'s `attach` callback (before any frame can arrive).
 */
export function createExecConnection(
  socket: WebSocket,
  handlers: ExecHandlers,
  options: {
    tty: boolean;
    operation: string;
    timeoutMs?: number | undefined;
    logger?: SandboxLogger | undefined;
  },
): ExecHandle {
  let tty = options.tty;
  let sessionId: string | undefined;
  let exitCode: number | undefined;
  let settleExit!: (code: number) => void;
  let failExit!: (error: Error) => void;
  const exited = new Promise<number>((resolve, reject) => {
    settleExit = resolve;
    failExit = reject;
  });
  // The handle's promise may be awaited late (or never, for a fire-and-forget close).
  exited.catch(() => undefined);

  // The command's deadline runs from the completed upgrade, which has its own.
  let timer: NodeJS.Timeout | undefined;
  const armTimeout = (): void => {
    if (options.timeoutMs === undefined || exitCode !== undefined) return;
    const timeoutMs = options.timeoutMs;
    timer = setTimeout(() => {
      failExit(new SandboxTimeoutError(options.operation, timeoutMs));
      socket.terminate();
    }, timeoutMs);
  };
  if (socket.readyState === WebSocket.OPEN) armTimeout();
  else socket.once('open', armTimeout);
  const finish = (code: number): void => {
    if (exitCode !== undefined) return;
    exitCode = code;
    clearTimeout(timer);
    settleExit(code);
  };

  const onText = (text: string): void => {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      options.logger?.warn(
        { operation: options.operation },
        'sandbox exec: ignored a text frame that is not JSON',
      );
      return;
    }
    if (message === null || typeof message !== 'object') return;
    const control = message as Record<string, unknown>;
    if (control['type'] === 'exit') {
      finish(exitCodeOfControl(control));
      socket.close(1000);
      return;
    }
    if (control['type'] === 'session_info') {
      const id = control['session_id'] ?? control['id'];
      if (typeof id === 'string' || typeof id === 'number') sessionId = String(id);
      if (typeof control['tty'] === 'boolean') tty = control['tty'];
    }
    handlers.onControl?.(control);
  };

  socket.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
    // binaryType is 'nodebuffer': a message, even a fragmented one, arrives as one Buffer.
    const frame = data as Buffer;
    if (!isBinary) {
      onText(frame.toString('utf8'));
      return;
    }
    if (tty) {
      handlers.onStdout?.(frame);
      return;
    }
    if (frame.length === 0) return;
    switch (frame[0]) {
      case StreamId.stdout:
        handlers.onStdout?.(frame.subarray(1));
        break;
      case StreamId.stderr:
        handlers.onStderr?.(frame.subarray(1));
        break;
      case StreamId.exit:
        finish(decodeExitCode(frame.subarray(1)));
        socket.close(1000);
        break;
      default:
        options.logger?.warn(
          { operation: options.operation, streamId: frame[0] },
          'sandbox exec: ignored a frame with an unknown stream id',
        );
    }
  });
  socket.on('close', (code: number) => {
    if (exitCode === undefined) {
      options.logger?.debug?.(
        { operation: options.operation, closeCode: code },
        'sandbox exec: closed without an exit frame, exit 0',
      );
    }
    finish(0);
  });
  socket.on('error', (error: Error) => {
    options.logger?.warn(
      { operation: options.operation, error: error.message },
      'sandbox exec: socket error',
    );
  });

  const sendFrame = (frame: Buffer | string): Promise<void> =>
    new Promise((resolve, reject) => {
      if (socket.readyState !== WebSocket.OPEN) {
        reject(new SandboxTransportError(options.operation, new Error('the exec socket is not open')));
        return;
      }
      socket.send(frame, (error) =>
        error ? reject(new SandboxTransportError(options.operation, error)) : resolve(),
      );
    });

  return {
    get sessionId() {
      return sessionId;
    },
    get tty() {
      return tty;
    },
    async write(data) {
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      if (tty) {
        await sendFrame(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
        return;
      }
      for (let offset = 0; offset < bytes.byteLength; offset += maxStdinFrame) {
        const piece = bytes.subarray(offset, offset + maxStdinFrame);
        const frame = Buffer.allocUnsafe(piece.byteLength + 1);
        frame[0] = StreamId.stdin;
        frame.set(piece, 1);
        await sendFrame(frame);
      }
    },
    async end() {
      if (tty) return;
      await sendFrame(Buffer.from([StreamId.stdinEof]));
    },
    resize(cols, rows) {
      if (!tty || socket.readyState !== WebSocket.OPEN) return;
      socket.send(JSON.stringify({ type: 'resize', cols, rows }));
    },
    pause() {
      if (socket.readyState === WebSocket.OPEN) socket.pause();
    },
    resume() {
      if (socket.readyState === WebSocket.OPEN) socket.resume();
    },
    close() {
      if (socket.readyState === WebSocket.CONNECTING) socket.terminate();
      else socket.close(1000);
    },
    terminate() {
      socket.terminate();
    },
    exited,
  };
}
