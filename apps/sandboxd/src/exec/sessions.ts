/**
 * Exec sessions: every exec is a session supervised by sandboxd.
 *
 * Invariants (proved by test/exec.test.ts):
 * - Output is kept for replay from the beginning, bounded by `bufferBytes` per session: beyond it the oldest
 *   chunks are dropped and the byte counts dropped per stream are reported in the session_info frame.
 * - An attach sends session_info, then the whole kept output, then tails; nothing is lost or duplicated
 *   between replay and tail (both happen on the event loop without an await in between).
 * - A non-detachable session is killed (its whole process group) when its last socket drops; a detachable
 *   one keeps running and stays listed (is_active false) and attachable, also for a while after it exits.
 * - Output frames are always sent before the exit frame.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants as osConstants } from 'node:os';
import pty from '@lydell/node-pty';
import type { WebSocket } from 'ws';

export const STREAM = { stdin: 0, stdout: 1, stderr: 2, exit: 3, stdinEof: 4 } as const;
/** How long a finished detachable session stays listed and attachable. */
export const FINISHED_RETENTION_MS = 15 * 60 * 1000;
/** After the main process exits, how long to wait for its output pipes to drain. */
const DRAIN_MS = 300;

export interface ExecSpec {
  argv: string[];
  env: Record<string, string>;
  command: string;
  stdin: boolean;
  tty: boolean;
  rows: number;
  cols: number;
  detachable: boolean;
}

interface Chunk {
  stream: number;
  data: Buffer;
}

export interface SessionJson {
  id: string;
  command: string;
  created: string;
  last_activity: string;
  is_active: boolean;
  tty: boolean;
  detachable: boolean;
  exited: boolean;
  exit_code: number | null;
}

function exitFrame(code: number): Buffer {
  const b = Buffer.alloc(5);
  b[0] = STREAM.exit;
  b.writeInt32BE(code, 1);
  return b;
}

function signalCode(signal: string | null | undefined): number {
  if (!signal) return 0;
  const n = (osConstants.signals as Record<string, number>)[signal];
  return 128 + (n ?? 0);
}

export class Session {
  readonly id = randomBytes(8).toString('hex');
  readonly spec: ExecSpec;
  readonly created = new Date();
  lastActivity = new Date();
  exitCode: number | null = null;
  private readonly clients = new Set<WebSocket>();
  private readonly chunks: Chunk[] = [];
  private bytes = 0;
  private readonly dropped = { stdout: 0, stderr: 0 };
  private readonly bufferBytes: number;
  private child: ChildProcess | null = null;
  private term: pty.IPty | null = null;
  private pid = 0;
  private readonly onGone: (s: Session) => void;
  private retention: NodeJS.Timeout | null = null;

  constructor(spec: ExecSpec, bufferBytes: number, onGone: (s: Session) => void) {
    this.spec = spec;
    this.bufferBytes = bufferBytes;
    this.onGone = onGone;
  }

  get active(): boolean {
    return this.clients.size > 0;
  }

  toJSON(): SessionJson {
    return {
      id: this.id,
      command: this.spec.command,
      created: this.created.toISOString(),
      last_activity: this.lastActivity.toISOString(),
      is_active: this.active,
      tty: this.spec.tty,
      detachable: this.spec.detachable,
      exited: this.exitCode !== null,
      exit_code: this.exitCode,
    };
  }

  start(): void {
    const [file, ...args] = this.spec.argv;
    if (!file) throw new Error('empty argv');
    if (this.spec.tty) {
      const term = pty.spawn(file, args, {
        name: this.spec.env['TERM'] ?? 'xterm-256color',
        cols: this.spec.cols,
        rows: this.spec.rows,
        cwd: '/',
        env: this.spec.env,
        encoding: null,
      });
      this.term = term;
      this.pid = term.pid;
      term.onData((d: string | Buffer) => this.output(0, typeof d === 'string' ? Buffer.from(d) : d));
      term.onExit(({ exitCode, signal }) => {
        setTimeout(() => this.finish(signal ? 128 + signal : exitCode), 50);
      });
      return;
    }
    const child = spawn(file, args, {
      detached: true,
      env: this.spec.env,
      stdio: [this.spec.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.pid = child.pid ?? 0;
    child.stdin?.on('error', () => {});
    let open = 2;
    let exitCode: number | null = null;
    const done = () => {
      if (exitCode !== null && open === 0) this.finish(exitCode);
    };
    for (const [stream, s] of [
      [STREAM.stdout, child.stdout],
      [STREAM.stderr, child.stderr],
    ] as const) {
      s?.on('data', (d: Buffer) => this.output(stream, d));
      s?.on('close', () => {
        open--;
        done();
      });
    }
    child.on('error', () => {
      exitCode = 127;
      open = 0;
      done();
    });
    child.on('exit', (code, signal) => {
      exitCode = code ?? signalCode(signal);
      // Background processes may keep the pipes open: do not wait for them forever.
      setTimeout(() => {
        open = 0;
        done();
      }, DRAIN_MS).unref();
      done();
    });
  }

  private output(stream: number, data: Buffer): void {
    this.lastActivity = new Date();
    this.chunks.push({ stream, data });
    this.bytes += data.length;
    while (this.bytes > this.bufferBytes && this.chunks.length > 1) {
      const c = this.chunks.shift()!;
      this.bytes -= c.data.length;
      if (c.stream === STREAM.stderr) this.dropped.stderr += c.data.length;
      else this.dropped.stdout += c.data.length;
    }
    const frame = this.spec.tty ? data : Buffer.concat([Buffer.from([stream]), data]);
    for (const ws of this.clients) ws.send(frame);
  }

  private finish(code: number): void {
    if (this.exitCode !== null) return;
    this.exitCode = code;
    this.lastActivity = new Date();
    for (const ws of this.clients) this.sendExit(ws);
    if (this.spec.detachable) {
      this.retention = setTimeout(() => this.onGone(this), FINISHED_RETENTION_MS);
      this.retention.unref();
    } else if (this.clients.size === 0) {
      this.onGone(this);
    }
  }

  private sendExit(ws: WebSocket): void {
    if (this.spec.tty) ws.send(JSON.stringify({ type: 'exit', exit_code: this.exitCode }));
    else ws.send(exitFrame(this.exitCode ?? 0));
    ws.close(1000, 'exited');
  }

  /** Attaches a socket: session_info, full replay, then live output; input is accepted from it. */
  attach(ws: WebSocket, owner: boolean): void {
    this.lastActivity = new Date();
    ws.send(
      JSON.stringify({
        type: 'session_info',
        session_id: this.id,
        command: this.spec.command,
        created: this.created.toISOString(),
        tty: this.spec.tty,
        ...(this.spec.tty ? { rows: this.spec.rows, cols: this.spec.cols } : {}),
        is_owner: owner,
        detachable: this.spec.detachable,
        replay_dropped_bytes: { ...this.dropped },
      }),
    );
    for (const c of this.chunks)
      ws.send(this.spec.tty ? c.data : Buffer.concat([Buffer.from([c.stream]), c.data]));
    if (this.exitCode !== null) {
      this.sendExit(ws);
      return;
    }
    this.clients.add(ws);
    ws.on('message', (data: Buffer, isBinary: boolean) => this.input(data, isBinary));
    ws.on('close', () => {
      this.clients.delete(ws);
      this.lastActivity = new Date();
      if (this.clients.size === 0) {
        if (this.exitCode === null && !this.spec.detachable) this.kill();
        else if (this.exitCode !== null && !this.spec.detachable) this.onGone(this);
      }
    });
  }

  private input(data: Buffer, isBinary: boolean): void {
    this.lastActivity = new Date();
    if (!isBinary) {
      let msg: { type?: unknown; rows?: unknown; cols?: unknown };
      try {
        msg = JSON.parse(data.toString('utf8'));
      } catch {
        return;
      }
      if (msg.type === 'resize' && this.term) {
        const rows = Number(msg.rows);
        const cols = Number(msg.cols);
        if (
          Number.isInteger(rows) &&
          Number.isInteger(cols) &&
          rows > 0 &&
          cols > 0 &&
          rows < 10000 &&
          cols < 10000
        ) {
          this.term.resize(cols, rows);
        }
      }
      return;
    }
    if (this.term) {
      // node-pty's typings say string, but with encoding null it writes Buffers unchanged (raw bytes).
      this.term.write(data as unknown as string);
      return;
    }
    if (data.length === 0) return;
    if (data[0] === STREAM.stdin) this.child?.stdin?.write(data.subarray(1));
    else if (data[0] === STREAM.stdinEof) this.child?.stdin?.end();
  }

  /** Kills the session's whole process group. */
  kill(): void {
    if (this.exitCode !== null || this.pid <= 0) return;
    try {
      process.kill(-this.pid, 'SIGKILL');
    } catch {}
    try {
      this.term?.kill('SIGKILL');
    } catch {}
  }

  dispose(): void {
    if (this.retention) clearTimeout(this.retention);
    this.kill();
    for (const ws of this.clients) ws.close(1001, 'sandbox stopped');
    this.clients.clear();
  }
}

export class SessionTable {
  private readonly sessions = new Map<string, Session>();
  private readonly bufferBytes: number;
  constructor(bufferBytes: number) {
    this.bufferBytes = bufferBytes;
  }

  create(spec: ExecSpec): Session {
    const s = new Session(spec, this.bufferBytes, (gone) => this.sessions.delete(gone.id));
    this.sessions.set(s.id, s);
    return s;
  }

  get(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  list(): SessionJson[] {
    return [...this.sessions.values()].map((s) => s.toJSON());
  }

  /** Kills and forgets every session (sandbox stopped, restored or destroyed). */
  clear(): void {
    for (const s of this.sessions.values()) s.dispose();
    this.sessions.clear();
  }
}
