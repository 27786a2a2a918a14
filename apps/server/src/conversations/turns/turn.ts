// One turn's process in the sandbox: spawned detachable under a small wrapper, its output
// handed to the single log writer, its end classified.
//
// What must hold (conversations.lifecycle.test.ts unless named):
// 1. The runtime runs in a new session (setsid) whose leader records its pid in
//    /home/sandbox/.paddock/turn-<turnId>.pid, so interrupt can signal the whole process group
//    with an exec of `kill` (the backend interface has no kill): TERM, then KILL after 5 s.
//    Test: "interrupt stops the running turn".
// 2. Output goes to writer.output() synchronously in the data callbacks (no await in the data
//    path), stdout also line by line to the adapter's parseLine; every event it returns goes to
//    writer.event() (stored, redacted, after the output before it) and session id and usage are
//    taken from them. At the process's end the writer's hold-back ends before the last line is
//    read, so the event of a last line without a newline follows its bytes too. A line the
//    adapter cannot read (it throws) is kept as a raw event: a parse error never breaks the
//    turn. Test (conversations.events.test.ts): "stores a turn's events in order with its
//    output, a line the adapter cannot read as raw".
// 3. The socket closing is not proof of an exit (spec rule 1 reads a close without an exit
//    frame as exit 0): the backend's session list decides. A session still running, or a
//    backend that cannot be asked, means the turn's socket dropped → the turn failed.
//    Test: "a turn whose backend socket drops fails and the conversation goes idle".
// 4. detach() (the owner stopping) drops the socket and leaves the process running for the
//    next owner to reattach; the run then ends as `detached` and nothing is written.
// 5. Reattach: the parser reads the whole replay, also the head whose bytes are already
//    persisted (the writer gets only the rest), so a line cut by the persisted boundary is read
//    whole. The events the previous owner stored are not written again, though their session id
//    and usage count: they are the first N the parser finds, N counted in the log when
//    re-joining (the events of a line follow its bytes in the writer, but a kill can fall between
//    the batch with a line's bytes and the one with its events, so the byte boundary alone would
//    lose those events). When the backend no longer keeps the head of the replay, the byte
//    boundary decides: events of lines that end inside the persisted head count as stored.
//    Tests: conversations.kill9.test.ts "a line cut by the kill is one event after reattach";
//    turn.test.ts "writes exactly the events the previous owner did not store, whatever the
//    chunks".
// 6. An interrupt reaches a turn however early it comes: the exec of the turn returns before its
//    shell has recorded its pid, so TERM is sent again (every PID_POLL_MS) until the pid file
//    holds the pid, the turn ended or the grace period is over; only a turn still running at the
//    end of the grace period gets KILL, and the server logs that. Test
//    (conversations.interrupt-race.test.ts): "ends the turn interrupted by SIGTERM at every early
//    offset, never by the SIGKILL".
// 7. A failed turn's error says why in words before the exit code: the wrapper's own sentence on
//    stderr (a line starting `paddock: `, such as the missing credential of common.ts), else the
//    last error event the adapter read (the CLI's own words: a refused key, a network refusal),
//    else only the exit code. Tests (conversations.turn-reason.test.ts): "the wrapper's sentence
//    on stderr is the failed turn's reason, before the exit code", "the CLI's last error event is
//    the reason when the wrapper said nothing".
import { setTimeout as sleep } from 'node:timers/promises';
import type { ExecHandle, SandboxClient } from '@paddock/sandbox-client';
import { isUuid } from '../../resources/fields.ts';
import type { LogWriter, RuntimeAdapter, TurnEvent } from '../contracts.ts';
import type { TurnUsage } from '../conversations.tables.ts';
import type { OutputSink } from './output-sink.ts';
import { replayDropped } from './reattach.ts';

export const PADDOCK_DIR = '/home/sandbox/.paddock';
export const INTERRUPT_GRACE_MS = 5000;
/** The signal script's exit status when the turn's pid file is still empty or missing. */
const NO_PID_YET = 3;
/** How soon an interrupt looks again for the pid of a turn that just started (invariant 6). */
const PID_POLL_MS = 10;
const MAX_LINE = 1024 * 1024;

export function pidFile(turnId: string): string {
  return `${PADDOCK_DIR}/turn-${turnId}.pid`;
}

/**
 * The runtime's argv under the pid-recording session wrapper (invariant 1). Shell builtins only, but
 * for a mkdir the first turn of a sandbox needs: every process started here is on the path to the
 * turn's first output byte (docs/performance.md). The pid-recording lines go in front of the
 * runtime's own script when its command is one (`sh -c script [name args…]`, as every adapter's
 * is), in the same shell: one exec fewer per turn; any other command is exec'd by them. The pid
 * recorded is that shell's, which an `exec` keeps.
 */
export function wrapTurn(argv: string[], turnId: string): string[] {
  // Fixed paths in the script (a UUID has no character the shell treats specially): no positional
  // parameter of the runtime's script moves.
  if (!isUuid(turnId)) throw new Error('a turn id is a UUID');
  const record = `{ [ -d ${PADDOCK_DIR} ] || mkdir -p -- ${PADDOCK_DIR}; } && echo $$ > ${pidFile(turnId)} || exit`;
  const [program, flag, script, ...args] = argv;
  if (program === 'sh' && flag === '-c' && script !== undefined)
    return ['setsid', '-w', 'sh', '-c', `${record}\n${script}`, ...args];
  return ['setsid', '-w', 'sh', '-c', `${record}\nexec "$@"`, 'paddock-turn', ...argv];
}

export type TurnEnd =
  | {
      status: 'succeeded' | 'failed' | 'interrupted';
      exitCode: number | null;
      error: string | null;
      sessionId?: string;
      usage?: TurnUsage;
    }
  | { status: 'detached' };

export interface TurnRun {
  readonly done: Promise<TurnEnd>;
  /** TERM, then KILL after INTERRUPT_GRACE_MS; says which one ended the turn. */
  interrupt(): Promise<'terminated' | 'killed'>;
  detach(): void;
}

/** Feeds stdout line by line to the adapter and keeps what it reported. Exported for its tests. */
export class LineParser {
  private pending: Buffer[] = [];
  private size = 0;
  sessionId: string | undefined;
  usage: TurnUsage | undefined;
  /** The adapter's memory of this turn's earlier lines (RuntimeAdapter.parseLine). */
  private readonly memory = new Map<string, string>();
  /** The message of the last error event (invariant 7). */
  lastError: string | undefined;
  private readonly adapter: Pick<RuntimeAdapter, 'parseLine'>;
  private readonly writer: Pick<LogWriter, 'event'>;
  private readonly turnId: string;
  /** Re-joining: how many of the events still to come were stored already; null: the byte rule. */
  private storedEvents: number | null;
  constructor(
    adapter: Pick<RuntimeAdapter, 'parseLine'>,
    writer: Pick<LogWriter, 'event'>,
    turnId: string,
    storedEvents: number | null = null,
  ) {
    this.adapter = adapter;
    this.writer = writer;
    this.turnId = turnId;
    this.storedEvents = storedEvents;
  }

  /** The replay lacks its head (the backend dropped it): counting events from the start is off. */
  useByteRule(): void {
    this.storedEvents = null;
  }

  /**
   * `persisted`: how many leading bytes of `chunk` a previous owner already stored (invariant 5;
   * decides only under the byte rule).
   */
  push(chunk: Buffer, persisted = 0): void {
    let start = 0;
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, start)) {
      this.pending.push(chunk.subarray(start, i));
      this.line(Buffer.concat(this.pending).toString('utf8'), i < persisted);
      this.pending = [];
      this.size = 0;
      start = i + 1;
    }
    if (start < chunk.length && this.size < MAX_LINE) {
      const rest = chunk.subarray(start, start + (MAX_LINE - this.size));
      this.pending.push(Buffer.from(rest));
      this.size += rest.length;
    }
  }

  end(): void {
    if (this.pending.length > 0) this.line(Buffer.concat(this.pending).toString('utf8'));
    this.pending = [];
  }

  private line(text: string, stored = false): void {
    let events: TurnEvent[];
    try {
      events = this.adapter.parseLine(text, this.memory);
    } catch {
      events = text.trim() === '' ? [] : [{ kind: 'raw', line: text }];
    }
    for (const event of events) {
      let already = stored;
      if (this.storedEvents !== null) {
        already = this.storedEvents > 0;
        if (already) this.storedEvents--;
      }
      if (!already) this.writer.event(this.turnId, event);
      if (event.kind === 'session') this.sessionId = event.session_id;
      else if (event.kind === 'usage') this.usage = addUsage(this.usage, event.usage);
      else if (event.kind === 'error' && event.message.trim() !== '') this.lastError = event.message.trim();
    }
  }
}

/**
 * A turn's usage events add up: a runtime that reports per model call (opencode's steps) sends
 * one event per call, the others one per turn (contracts.ts TurnEvent).
 */
export function addUsage(sum: TurnUsage | undefined, add: TurnUsage): TurnUsage {
  const out: TurnUsage = { ...sum };
  for (const key of ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cost_usd'] as const) {
    const n = add[key];
    if (typeof n === 'number' && Number.isFinite(n)) out[key] = (out[key] ?? 0) + n;
  }
  return out;
}

/** The prefix of the sentences the turn's own wrapper prints on stderr (common.ts). */
const WRAPPER_PREFIX = 'paddock: ';
/** A wrapper sentence is kept up to this many characters. */
const MAX_REASON = 1000;

/** Keeps the last wrapper sentence of a turn's stderr (invariant 7), whatever the chunks. */
export class WrapperSentence {
  private carry = '';
  last: string | undefined;

  push(chunk: Buffer): void {
    const lines = (this.carry + chunk.toString('utf8')).split('\n');
    this.carry = (lines.pop() ?? '').slice(0, MAX_REASON + WRAPPER_PREFIX.length);
    for (const line of lines) this.line(line);
  }

  end(): void {
    this.line(this.carry);
    this.carry = '';
  }

  private line(line: string): void {
    if (line.startsWith(WRAPPER_PREFIX))
      this.last = line.slice(WRAPPER_PREFIX.length).trim().slice(0, MAX_REASON) || this.last;
  }
}

/** A failed turn's error (invariant 7): why in words, then the exit code. */
export function failureReason(exitCode: number | null, why: string | undefined): string {
  const code = `the runtime exited with code ${exitCode}`;
  return why ? `${why} (${code})` : code;
}

export interface TurnIo {
  sandbox: SandboxClient;
  sandboxName: string;
  turnId: string;
  writer: LogWriter;
  adapter: RuntimeAdapter;
  /** Called once the backend named the exec session (stored for reattach). */
  onSession(sessionId: string): void;
}

/**
 * The turn's output to the writer (through `wrap`, which drops a replayed head) and its stdout
 * to the parser, whole (invariant 5). `persisted()`: replayed stdout bytes still to drop.
 */
function turnSink(
  io: TurnIo,
  parser: LineParser,
  said: WrapperSentence,
  wrap: (sink: OutputSink) => OutputSink,
  persisted: () => number,
): OutputSink {
  const kept = wrap({
    stdout: (chunk) => io.writer.output('stdout', chunk, io.turnId),
    stderr: (chunk) => io.writer.output('stderr', chunk, io.turnId),
  });
  return {
    stdout: (chunk) => {
      const stored = Math.min(chunk.length, persisted());
      kept.stdout(chunk);
      parser.push(chunk, stored);
    },
    stderr: (chunk) => {
      kept.stderr(chunk);
      said.push(chunk);
    },
  };
}

/** Calls `onFirst` once, before the first non-empty chunk of stdout or stderr is handed on. */
function noticeFirstOutput(onFirst: (() => void) | undefined): (sink: OutputSink) => OutputSink {
  if (!onFirst) return (sink) => sink;
  return (sink) => {
    let seen = false;
    const first = (chunk: Buffer) => {
      if (seen || chunk.length === 0) return;
      seen = true;
      onFirst();
    };
    return {
      stdout: (chunk) => {
        first(chunk);
        sink.stdout(chunk);
      },
      stderr: (chunk) => {
        first(chunk);
        sink.stderr(chunk);
      },
    };
  };
}

/**
 * Spawns the turn. Rejects when the exec never starts (the caller fails the turn). `onFirstOutput`:
 * told of the turn's first output byte (the time-to-first-output metric).
 */
export async function startTurn(
  io: TurnIo,
  command: { argv: string[]; env: Record<string, string>; cwd: string },
  onFirstOutput?: () => void,
): Promise<TurnRun> {
  const parser = new LineParser(io.adapter, io.writer, io.turnId);
  return await follow(
    io,
    parser,
    (sink, onControl) =>
      io.sandbox.execStream(io.sandboxName, {
        cmd: wrapTurn(command.argv, io.turnId),
        env: command.env,
        dir: command.cwd,
        detachable: true,
        onStdout: sink.stdout,
        onStderr: sink.stderr,
        onControl,
      }),
    noticeFirstOutput(onFirstOutput),
  );
}

/**
 * Re-joins a running turn's session; `wrap` lets reattach drop the replayed head, `persisted`
 * says how many replayed stdout bytes it still drops (reattach.ts), `storedEvents` how many of the
 * turn's events the log holds already (invariant 5).
 */
export async function attachTurn(
  io: TurnIo,
  sessionId: string,
  wrap: (sink: OutputSink) => OutputSink,
  onInfo: (message: Record<string, unknown>) => void,
  persisted: () => number,
  storedEvents: number,
): Promise<TurnRun> {
  const parser = new LineParser(io.adapter, io.writer, io.turnId, storedEvents);
  const info = (message: Record<string, unknown>) => {
    if (replayDropped(message).stdout > 0) parser.useByteRule();
    onInfo(message);
  };
  return await follow(
    io,
    parser,
    (sink, onControl) =>
      io.sandbox.attach(io.sandboxName, sessionId, {
        onStdout: sink.stdout,
        onStderr: sink.stderr,
        onControl,
      }),
    wrap,
    persisted,
    sessionId,
    info,
  );
}

async function follow(
  io: TurnIo,
  parser: LineParser,
  open: (sink: OutputSink, onControl: (m: Record<string, unknown>) => void) => Promise<ExecHandle>,
  wrap: (sink: OutputSink) => OutputSink = (s) => s,
  persisted: () => number = () => 0,
  knownSession?: string,
  onInfo?: (message: Record<string, unknown>) => void,
): Promise<TurnRun> {
  let sessionId = knownSession;
  let interrupted = false;
  let detached = false;
  const onControl = (m: Record<string, unknown>) => {
    onInfo?.(m);
    const id = m['id'] ?? m['session_id'];
    if (
      m['type'] === 'session_info' &&
      sessionId === undefined &&
      (typeof id === 'string' || typeof id === 'number')
    ) {
      sessionId = String(id);
      io.onSession(sessionId);
    }
  };
  const said = new WrapperSentence();
  const handle = await open(turnSink(io, parser, said, wrap, persisted), onControl);
  if (sessionId === undefined && handle.sessionId !== undefined) {
    sessionId = handle.sessionId;
    io.onSession(sessionId);
  }

  const done = (async (): Promise<TurnEnd> => {
    let code: number;
    try {
      code = await handle.exited;
    } catch {
      code = -1;
    }
    // Detached: the process runs on and the next owner reads the rest of its last line.
    if (detached) return { status: 'detached' };
    // The output is complete: the writer ends its hold-back now (synchronously; the batch is
    // persisted with the turn's end stage, which reports a failure), so the event of a last
    // line without a newline follows that line's bytes.
    io.writer.flush().catch(() => {});
    parser.end();
    said.end();
    const reported = {
      ...(parser.sessionId ? { sessionId: parser.sessionId } : {}),
      ...(parser.usage ? { usage: parser.usage } : {}),
    };
    let exitCode: number | null = code;
    try {
      const sessions = sessionId ? await io.sandbox.listSessions(io.sandboxName, { timeoutMs: 10_000 }) : [];
      const info = sessions.find((s) => s.id === sessionId);
      if (info && info['exited'] === false) {
        return {
          status: 'failed',
          exitCode: null,
          error: 'the connection to the sandbox dropped',
          ...reported,
        };
      }
      if (info && typeof info['exit_code'] === 'number') exitCode = info['exit_code'];
    } catch {
      return {
        status: 'failed',
        exitCode: null,
        error: 'the sandbox backend cannot be reached',
        ...reported,
      };
    }
    if (interrupted) return { status: 'interrupted', exitCode, error: 'interrupted', ...reported };
    if (exitCode === 0) return { status: 'succeeded', exitCode, error: null, ...reported };
    return {
      status: 'failed',
      exitCode,
      error: failureReason(exitCode, said.last ?? parser.lastError),
      ...reported,
    };
  })();

  let ended = false;
  void done.then(() => {
    ended = true;
  });
  /**
   * `kill -s SIG -- -PGID`: the form dash's builtin and every other kill accept. False when the
   * turn's shell has not recorded its pid yet (invariant 6): nothing was signalled.
   */
  const signal = async (sig: 'TERM' | 'KILL'): Promise<boolean> => {
    const result = await io.sandbox.exec(io.sandboxName, {
      cmd: [
        'sh',
        '-c',
        `[ -s "$1" ] || exit ${NO_PID_YET}; kill -s ${sig} -- "-$(cat "$1")"`,
        'paddock-interrupt',
        pidFile(io.turnId),
      ],
      timeoutMs: 5000,
    });
    return result.exitCode !== NO_PID_YET;
  };

  return {
    done,
    async interrupt() {
      interrupted = true;
      const graceEnds = Date.now() + INTERRUPT_GRACE_MS;
      while (!(await signal('TERM')) && !ended && Date.now() < graceEnds) await sleep(PID_POLL_MS);
      const timer = new Promise<'late'>((resolve) =>
        setTimeout(() => resolve('late'), Math.max(0, graceEnds - Date.now())).unref(),
      );
      if ((await Promise.race([done.then(() => 'done' as const), timer])) === 'done') return 'terminated';
      await signal('KILL');
      return 'killed';
    },
    detach() {
      detached = true;
      handle.close();
    },
  };
}
