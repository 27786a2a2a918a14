// An interactive shell in the conversation's live sandbox, bridged to a WebSocket: the
// browser's or the CLI's frames to a TTY exec on the backend (spec: sandbox interface, TTY
// mode) and back. terminal.routes.ts admits the connection; this file runs it.
//
// The protocol to the client (docs/api.md, "Terminal"): binary frames are terminal bytes both
// ways; a text frame is JSON: `{"type":"resize","cols":N,"rows":M}` from the client,
// `{"type":"exit","code":N}` from the server just before it closes (1000), and
// `{"type":"error","message":"…"}` before a close 1011 when the shell could not be started.
//
// What must hold (tests in test/work.terminal.test.ts):
// 1. Every byte to the client passes the conversation's redactor (files-access.ts), through one
//    streaming redactor, so a secret split across the backend's frames is still caught. The
//    redactor holds back the bytes that may begin a secret; for an interactive echo they are
//    flushed after QUIET_FLUSH_MS without output (a program that pauses longer than that in
//    the middle of printing a secret shows its head; the rest is redacted). Test: "the
//    terminal's output is redacted".
// 2. Bounded per process: at most `maxPerConversation` open terminals per conversation and
//    `maxPerUser` per user (429 `too_many_terminals` before the upgrade); the slot is taken
//    before the upgrade and released exactly once, when the connection's socket closes.
//    Output to a client that does not read is held back at the backend (the exec socket is
//    paused above MAX_BUFFERED bytes), never buffered without bound.
// 3. While open it keeps the idle clock from reclaiming the sandbox: every `activityMs` it sets
//    the conversation's last_activity_at (the clock, on whichever process owns the
//    conversation, reads that column), and only while the sandbox is still the conversation's
//    ready one: a conversation deleted or terminated, or a sandbox reclaimed, ends the terminal
//    (exit, close) at the next beat at the latest; the backend's exec ends with the sandbox
//    anyway. The max lifetime still applies. Test: "an open terminal keeps the idle clock…".
// 4. Opening one is audited (`conversation.terminal.opened`, written by terminal.routes.ts before
//    the upgrade: no audit row, no terminal), and so is its end (`conversation.terminal.closed`:
//    exit code, seconds open). Never a byte of the session is logged.
import type { ExecHandle, SandboxClient } from '@paddock/sandbox-client';
import { sql } from 'kysely';
import type { WebSocket } from 'ws';
import type { AuditService } from '../../audit/audit.service.ts';
import type { Db } from '../../db/database.ts';
import { AppError } from '../../http/errors.ts';
import type { Logger } from '../../observability/logger.ts';
import type { SecretRegistry } from '../log/redactor.ts';
import type { LiveSandbox } from './files-access.ts';

/** Bytes queued to a client above which the backend's output is held back. */
const MAX_BUFFERED = 1024 * 1024;
/** A client's input frame at most (a paste). */
export const MAX_INPUT_FRAME = 1024 * 1024;
export const DEFAULT_COLS = 80;
export const DEFAULT_ROWS = 24;

export interface TerminalOptions {
  /** How often an open terminal sets last_activity_at (default 60 s; tests shorten it). */
  activityMs: number;
  /** Quiet time after which held-back output is flushed (invariant 1). */
  quietFlushMs: number;
  maxPerConversation: number;
  maxPerUser: number;
}

export const DEFAULT_TERMINAL_OPTIONS: TerminalOptions = {
  activityMs: 60_000,
  quietFlushMs: 25,
  maxPerConversation: 4,
  maxPerUser: 16,
};

/** The login shell of the terminal: the agent's environment (the env file), in the home. */
export const SHELL_COMMAND = [
  'bash',
  '-c',
  // The env file assigns only (env-file.ts); `bash -i` keeps the PATH the backend gives every
  // exec (the agent CLIs first), which a login shell's /etc/profile would reset.
  'set -a; [ -r "$HOME/.paddock/env" ] && . "$HOME/.paddock/env"; set +a; cd "$HOME" 2>/dev/null; exec bash -i',
];

export interface TerminalSlot {
  release(): void;
}

/** The open terminals of this process (invariant 2). */
export interface Terminals {
  readonly options: TerminalOptions;
  /** Takes a slot or throws 429 `too_many_terminals`. */
  take(userId: string, conversationId: string): TerminalSlot;
  readonly open: number;
}

export function createTerminals(options: Partial<TerminalOptions> = {}): Terminals {
  const merged: TerminalOptions = { ...DEFAULT_TERMINAL_OPTIONS, ...options };
  const perUser = new Map<string, number>();
  const perConversation = new Map<string, number>();
  let open = 0;
  const bump = (map: Map<string, number>, key: string, by: number) => {
    const next = (map.get(key) ?? 0) + by;
    if (next <= 0) map.delete(key);
    else map.set(key, next);
  };
  return {
    options: merged,
    get open() {
      return open;
    },
    take(userId, conversationId) {
      if ((perConversation.get(conversationId) ?? 0) >= merged.maxPerConversation)
        throw new AppError(
          'too_many_terminals',
          `this conversation has ${merged.maxPerConversation} open terminals (the most at once): close one first`,
          { headers: { 'retry-after': '5' } },
        );
      if ((perUser.get(userId) ?? 0) >= merged.maxPerUser)
        throw new AppError(
          'too_many_terminals',
          `you have ${merged.maxPerUser} open terminals (the most at once): close one first`,
          { headers: { 'retry-after': '5' } },
        );
      bump(perUser, userId, 1);
      bump(perConversation, conversationId, 1);
      open++;
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          bump(perUser, userId, -1);
          bump(perConversation, conversationId, -1);
          open--;
        },
      };
    },
  };
}

export interface TerminalSessionDeps {
  db: Db;
  sandbox: SandboxClient;
  audit: Pick<AuditService, 'record'>;
  logger: Logger;
}

export interface TerminalSession {
  live: LiveSandbox;
  registry: SecretRegistry;
  cols: number;
  rows: number;
  options: TerminalOptions;
  audit: { actor: Parameters<AuditService['record']>[0]['actor']; ip: string | null };
}

/** Sets last_activity_at while the sandbox is the conversation's ready one; false when it is not (invariant 3). */
async function touch(db: Db, live: LiveSandbox): Promise<boolean> {
  const result = await sql`
    UPDATE conversations SET last_activity_at = now()
      WHERE tenant_id = ${live.tenantId} AND id = ${live.conversationId}
        AND EXISTS (SELECT 1 FROM sandboxes
          WHERE tenant_id = ${live.tenantId} AND conversation_id = ${live.conversationId}
            AND name = ${live.name} AND status = 'ready')`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

function controlOf(text: string): { cols: number; rows: number } | null {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return null;
  }
  if (message === null || typeof message !== 'object') return null;
  const { type, cols, rows } = message as Record<string, unknown>;
  if (type !== 'resize') return null;
  const size = (v: unknown) =>
    typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 1000 ? v : null;
  const c = size(cols);
  const r = size(rows);
  return c !== null && r !== null ? { cols: c, rows: r } : null;
}

/**
 * Runs one terminal on an upgraded socket until either side ends. The caller has admitted the
 * connection (auth, origin, the live sandbox, a slot) and attached nothing to the socket yet.
 */
export function runTerminal(
  deps: TerminalSessionDeps,
  socket: WebSocket,
  session: TerminalSession,
): Promise<void> {
  const { live, options } = session;
  const openedAt = Date.now();
  const redactor = session.registry.stream();
  let handle: ExecHandle | null = null;
  let closed = false;
  let exitCode: number | null = null;
  let quiet: NodeJS.Timeout | undefined;
  const pendingInput: Buffer[] = [];
  let pendingResize: { cols: number; rows: number } | null = null;

  const send = (bytes: Buffer): void => {
    if (bytes.length === 0 || socket.readyState !== socket.OPEN) return;
    socket.send(bytes, { binary: true }, () => {
      if (socket.bufferedAmount < MAX_BUFFERED / 4) handle?.resume();
    });
    if (socket.bufferedAmount > MAX_BUFFERED) handle?.pause();
  };
  const flushQuiet = (): void => {
    quiet = undefined;
    send(redactor.flush());
  };
  const onOutput = (chunk: Buffer): void => {
    send(redactor.write(chunk));
    clearTimeout(quiet);
    quiet = setTimeout(flushQuiet, options.quietFlushMs);
  };

  // Input and resizes that arrive before the shell is up wait for it.
  socket.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary) {
      const resize = controlOf(data.toString('utf8'));
      if (!resize) return;
      if (handle) handle.resize(resize.cols, resize.rows);
      else pendingResize = resize;
      return;
    }
    if (handle) handle.write(data).catch(() => {});
    else pendingInput.push(data);
  });

  return new Promise<void>((resolve) => {
    let beat: NodeJS.Timeout | undefined;
    const finish = (code: number | null, reason?: string): void => {
      if (closed) return;
      closed = true;
      clearTimeout(quiet);
      clearInterval(beat);
      send(redactor.flush());
      if (socket.readyState === socket.OPEN) {
        if (code !== null) socket.send(JSON.stringify({ type: 'exit', code }));
        else if (reason) socket.send(JSON.stringify({ type: 'error', message: reason }));
        socket.close(code !== null ? 1000 : 1011);
      }
      handle?.close();
      deps.audit
        .record({
          type: 'conversation.terminal.closed',
          tenantId: live.tenantId,
          actor: session.audit.actor,
          ip: session.audit.ip,
          metadata: {
            conversation_id: live.conversationId,
            sandbox: live.name,
            exit_code: code,
            seconds_open: Math.round((Date.now() - openedAt) / 1000),
          },
        })
        .catch((error: unknown) =>
          deps.logger.warn({ err: error }, 'terminal: the closing audit row was not written'),
        )
        .finally(resolve);
    };
    socket.once('close', () => finish(exitCode));
    socket.on('error', () => finish(exitCode));

    deps.sandbox
      .execStream(live.name, {
        cmd: SHELL_COMMAND,
        tty: true,
        cols: pendingResize?.cols ?? session.cols,
        rows: pendingResize?.rows ?? session.rows,
        onStdout: onOutput,
        onStderr: onOutput,
      })
      .then(
        async (opened) => {
          if (closed) {
            opened.close();
            return;
          }
          handle = opened;
          if (pendingResize) opened.resize(pendingResize.cols, pendingResize.rows);
          for (const data of pendingInput.splice(0)) opened.write(data).catch(() => {});
          beat = setInterval(() => {
            touch(deps.db, live).then(
              (ready) => {
                if (!ready) finish(null, "the conversation's sandbox is no longer running");
              },
              (error: unknown) =>
                deps.logger.warn({ err: error }, 'terminal: could not mark the sandbox active'),
            );
          }, options.activityMs);
          beat.unref();
          await touch(deps.db, live).catch(() => true);
          const code = await opened.exited.catch(() => null);
          exitCode = code;
          finish(code, 'the shell ended');
        },
        (error: unknown) => {
          deps.logger.warn({ err: error, sandbox: live.name }, 'terminal: the shell could not be started');
          finish(null, 'the shell could not be started in the sandbox: try again');
        },
      );
  });
}
