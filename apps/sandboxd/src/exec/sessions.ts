/**
 * Exec sessions: every exec is a session supervised by sandboxd.
 *
 * A blocking (non-detachable) piped session's process is sandboxd's own child (procs.ts). A detachable or a
 * TTY session runs under its own shim process (shim.ts), detached from sandboxd, which owns the process, its
 * stdio or pty and the replay buffer; sandboxd mirrors it over the shim's unix socket. The shim is usually
 * taken pre-started from the pool (shim-pool.ts), so such an exec starts about as fast as a blocking one. A restarted sandboxd finds the shims (and
 * the results of sessions that finished meanwhile) in <sandbox dir>/sessions/ and serves them as before.
 *
 * Invariants (proved by test/exec.test.ts and test/sessions-restart.test.ts):
 * - Output is kept for replay from the beginning, bounded by `bufferBytes` per session: beyond it the oldest
 *   chunks are dropped and the byte counts dropped per stream are reported in the session_info frame.
 * - An attach sends session_info, then the whole kept output, then tails; nothing is lost or duplicated
 *   between replay and tail (both happen on the event loop without an await in between).
 * - A non-detachable session is killed (its whole process group) when its last socket drops; a detachable
 *   one keeps running and stays listed (is_active false) and attachable, also for a while after it exits,
 *   and across sandboxd restarts.
 * - Output frames are always sent before the exit frame.
 * - A slow client never grows sandboxd's memory: past OUTPUT_HIGH_WATER bytes waiting in any attached client's
 *   socket, the session's output is paused (its pipe or pty, or the shim connection, which the shim answers by
 *   pausing its process) until every client is under OUTPUT_LOW_WATER (test/security.output.test.ts).
 * - Stopping, restoring or destroying the sandbox kills every session, shims included, and removes their
 *   directories.
 * - sandboxd never holds a pty: node-pty opens the master without close-on-exec, so every process sandboxd
 *   spawns afterwards, in any sandbox, would inherit another session's terminal
 *   (test/security.host.test.ts). A TTY session, blocking or not, therefore runs under a shim.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WebSocket } from 'ws';
import type { Logger } from '../log.ts';
import { processStartTime } from '../runtime/namespaces.ts';
import { type FifoPool, type Proc, spawnPiped } from './procs.ts';
import type { ShimPool } from './shim-pool.ts';
import {
  type Chunk,
  FrameDecoder,
  frame,
  MSG,
  OUTPUT_HIGH_WATER,
  OUTPUT_LOW_WATER,
  ReplayBuffer,
  type ResultFile,
  type SessionFile,
  type SessionMeta,
  type ShimHello,
  type ShimSpec,
  socketPathVia,
} from './shim-protocol.ts';

export const STREAM = { stdin: 0, stdout: 1, stderr: 2, exit: 3, stdinEof: 4 } as const;
/** How long a finished detachable session stays listed and attachable. */
export const FINISHED_RETENTION_MS = 15 * 60 * 1000;
/** Exit code reported for a detachable session whose shim died without recording the exit. */
export const LOST_EXIT_CODE = 255;

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

/** What every session of one sandbox shares. */
interface SessionContext {
  bufferBytes: number;
  fifos: FifoPool;
  /** session shims, pre-started (shim-pool.ts) */
  shims: ShimPool;
  /** <sandbox dir>/sessions */
  dir: string;
  log: Logger;
  onGone(s: Session): void;
}

function exitFrame(code: number): Buffer {
  const b = Buffer.alloc(5);
  b[0] = STREAM.exit;
  b.writeInt32BE(code, 1);
  return b;
}

function readJson<T>(file: string): T | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return null;
  }
}

function killGroup(pid: number): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {}
}

function killShim(pid: number): void {
  if (pid <= 0) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {}
}

type Input = Pick<Proc, 'write' | 'endInput' | 'resize'>;

export class Session {
  readonly id: string;
  readonly spec: SessionMeta;
  readonly created: Date;
  lastActivity = new Date();
  exitCode: number | null = null;
  private readonly clients = new Set<WebSocket>();
  private readonly replay: ReplayBuffer;
  private readonly ctx: SessionContext;
  private retention: NodeJS.Timeout | null = null;
  /** the session's process (group leader, host pid) */
  private childPid = 0;
  private input: Input | null = null;
  private proc: Proc | null = null;
  /** detachable sessions: the shim */
  private shim: { pid: number; start: string } | null = null;
  /** the link to the shim (its stdio, or a connection to its socket) */
  private shimLink: { from: net.Socket; destroy(): void } | null = null;
  /** sandboxd is stopping (detachAll) or the session was disposed: ignore the shim connection closing */
  private letGo = false;
  /** output paused for a slow client (see OUTPUT_HIGH_WATER) */
  private outputPaused = false;

  constructor(
    meta: Omit<SessionMeta, 'id' | 'created'> & { id?: string; created?: string },
    ctx: SessionContext,
  ) {
    this.id = meta.id ?? randomBytes(8).toString('hex');
    this.created = meta.created ? new Date(meta.created) : new Date();
    this.spec = {
      id: this.id,
      created: this.created.toISOString(),
      command: meta.command,
      tty: meta.tty,
      rows: meta.rows,
      cols: meta.cols,
      stdin: meta.stdin,
      detachable: meta.detachable,
    };
    this.ctx = ctx;
    this.replay = new ReplayBuffer(ctx.bufferBytes);
  }

  get active(): boolean {
    return this.clients.size > 0;
  }

  /** Whether the session runs under a shim (detachable or TTY; see the module comment). */
  get underShim(): boolean {
    return this.spec.detachable || this.spec.tty;
  }

  /** The shim's directory (sessions under a shim). */
  get dir(): string {
    return path.join(this.ctx.dir, this.id);
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

  /** Starts the process: under a shim when detachable or TTY, else as sandboxd's own child. */
  async start(argv: string[], env: Record<string, string>): Promise<void> {
    if (this.underShim) return this.startShim(argv, env);
    this.proc = spawnPiped(
      { argv, env, stdin: this.spec.stdin, fifos: await this.ctx.fifos.take(this.spec.stdin ? 3 : 2) },
      (stream, d) => this.output(stream, d),
      (code) => this.finish(code),
    );
    this.childPid = this.proc.pid;
    this.input = this.proc;
  }

  private async startShim(argv: string[], env: Record<string, string>): Promise<void> {
    const fifos = this.spec.tty ? [] : await this.ctx.fifos.take(this.spec.stdin ? 3 : 2);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const spec: ShimSpec = {
      ...this.spec,
      dir: this.dir,
      argv,
      env,
      bufferBytes: this.ctx.bufferBytes,
      fifos,
    };
    const child = this.ctx.shims.take();
    // The session line; the shim answers on its stdout with HELLO, output and the exit: the first link.
    child.stdin!.write(`${JSON.stringify(spec)}\n`);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('session shim did not start in 10 s')), 10_000);
        child.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        child.on('exit', (code) => {
          clearTimeout(timer);
          let why = '';
          try {
            why = readFileSync(path.join(this.dir, 'shim.log'), 'utf8').trim().slice(-2000);
          } catch {}
          reject(new Error(`session shim exited (${code}) before it was ready${why ? `: ${why}` : ''}`));
        });
        this.link(child.stdout as net.Socket, child.stdin as net.Socket, () => {
          clearTimeout(timer);
          resolve();
        });
      });
    } catch (err) {
      this.shimLink?.destroy();
      this.shimLink = null;
      try {
        child.kill('SIGKILL');
      } catch {}
      rmSync(this.dir, { recursive: true, force: true });
      throw err;
    } finally {
      child.removeAllListeners('exit');
      child.removeAllListeners('error');
      child.on('error', () => {});
      child.unref();
    }
    this.shim = { pid: child.pid ?? 0, start: processStartTime(child.pid ?? 0) ?? '' };
  }

  /** A session found on disk after a restart: running under a live shim, or finished. */
  adopt(file: SessionFile, result: ResultFile | null, output: Chunk[]): void {
    this.shim = { pid: file.shim_pid, start: file.shim_start };
    this.childPid = file.child_pid;
    if (result) this.restoreFinished(result, output);
    else this.connectShim();
  }

  private shimAlive(): boolean {
    return this.shim !== null && this.shim.pid > 0 && processStartTime(this.shim.pid) === this.shim.start;
  }

  /** Connects to the shim's socket (after a restart, or when the first link broke while the shim lives). */
  private connectShim(attempt = 0): void {
    let dirFd: number;
    try {
      dirFd = openSync(this.dir, 'r');
    } catch {
      this.shimGone(false, attempt);
      return;
    }
    const sock = net.connect(socketPathVia(dirFd, 'shim.sock'));
    let fdOpen = true;
    const closeFd = () => {
      if (fdOpen) closeSync(dirFd);
      fdOpen = false;
    };
    sock.on('connect', closeFd);
    sock.on('close', closeFd);
    this.link(sock, sock, undefined, attempt);
  }

  /**
   * Mirrors the shim over one link: `from` brings HELLO, the shim's whole kept output, then live output and
   * the exit; `to` takes input frames (a socket connection, or the shim's stdout and stdin). `onHello` runs
   * at the HELLO.
   */
  private link(from: net.Socket, to: net.Socket, onHello?: () => void, attempt = 0): void {
    const link = {
      from,
      destroy: () => {
        from.destroy();
        if (to !== from) to.destroy();
      },
    };
    this.shimLink = link;
    let hello = false;
    let exited = false;
    const decoder = new FrameDecoder((type, payload) => {
      if (type === MSG.hello) {
        const h = JSON.parse(payload.toString('utf8')) as ShimHello;
        hello = true;
        this.childPid = h.child_pid || this.childPid;
        this.replay.dropped.stdout = h.dropped.stdout;
        this.replay.dropped.stderr = h.dropped.stderr;
        this.lastActivity = new Date(h.last_activity);
        onHello?.();
      } else if (type === MSG.output && payload.length > 0) {
        this.output(payload[0]!, Buffer.from(payload.subarray(1)));
      } else if (type === MSG.exit) {
        exited = true;
        this.finish((JSON.parse(payload.toString('utf8')) as { exit_code: number }).exit_code);
      }
    });
    if (this.outputPaused) from.pause();
    from.on('data', (d: Buffer) => decoder.push(d));
    from.on('error', () => {});
    if (to !== from) to.on('error', () => {});
    from.on('close', () => {
      if (to !== from) to.destroy();
      if (this.shimLink === link) this.shimLink = null;
      // Before HELLO, the start (startShim) decides; afterwards a link that ends without the exit is the
      // shim finished meanwhile, or gone.
      if (!exited && !this.letGo && (hello || !onHello)) this.shimGone(hello, attempt);
    });
    this.input = {
      write: (d) => to.write(frame(MSG.stdin, d)),
      endInput: () => to.write(frame(MSG.stdinEof)),
      resize: (rows, cols) => to.write(frame(MSG.resize, JSON.stringify({ rows, cols }))),
    };
  }

  /** The shim connection ended without an exit message (the shim finished meanwhile, or died). */
  private shimGone(hadHello: boolean, attempt: number): void {
    if (this.exitCode !== null) return;
    const result = readJson<ResultFile>(path.join(this.dir, 'result.json'));
    if (result) {
      this.restoreFinished(result, hadHello ? null : this.readOutput());
      return;
    }
    if (this.shimAlive() && attempt < 50) {
      if (hadHello) {
        // A reconnect replays everything again: start over (attached clients may see output twice).
        this.ctx.log.warn('session shim connection lost; reconnecting', { session: this.id });
        this.replay.reset();
      }
      setTimeout(() => this.connectShim(attempt + 1), 100).unref();
      return;
    }
    this.ctx.log.warn('session shim is gone without a result', { session: this.id });
    killGroup(this.childPid);
    this.finish(LOST_EXIT_CODE);
  }

  private readOutput(): Chunk[] {
    try {
      return ReplayBuffer.parse(readFileSync(path.join(this.dir, 'output.bin')));
    } catch {
      return [];
    }
  }

  /** Fills a session from the shim's result files (null output: the output was already received). */
  private restoreFinished(result: ResultFile, output: Chunk[] | null): void {
    if (output) {
      this.replay.dropped.stdout = result.dropped.stdout;
      this.replay.dropped.stderr = result.dropped.stderr;
      for (const c of output) this.output(c.stream, c.data);
    }
    this.lastActivity = new Date(result.last_activity);
    const left = FINISHED_RETENTION_MS - (Date.now() - new Date(result.exited_at).getTime());
    this.finish(result.exit_code, Math.max(0, left));
  }

  private output(stream: number, data: Buffer): void {
    this.lastActivity = new Date();
    this.replay.push(stream, data);
    const frameOut = this.spec.tty ? data : Buffer.concat([Buffer.from([stream]), data]);
    for (const ws of this.clients) this.send(ws, frameOut);
  }

  /** Sends output to a client, pausing the session's output while that client is too far behind. */
  private send(ws: WebSocket, data: Buffer): void {
    ws.send(data, this.flowCheck);
    if (!this.outputPaused && ws.bufferedAmount > OUTPUT_HIGH_WATER) {
      this.outputPaused = true;
      if (this.proc) this.proc.pause();
      else this.shimLink?.from.pause();
    }
  }

  /** Resumes the output once every client caught up (runs as sent data reaches the kernel, and on detach). */
  private readonly flowCheck = (): void => {
    if (!this.outputPaused) return;
    for (const ws of this.clients) if (ws.bufferedAmount > OUTPUT_LOW_WATER) return;
    this.outputPaused = false;
    if (this.proc) this.proc.resume();
    else this.shimLink?.from.resume();
  };

  private finish(code: number, retentionMs = FINISHED_RETENTION_MS): void {
    if (this.exitCode !== null) return;
    this.exitCode = code;
    this.lastActivity = new Date();
    for (const ws of this.clients) this.sendExit(ws);
    if (this.spec.detachable) {
      this.retention = setTimeout(() => this.ctx.onGone(this), retentionMs);
      this.retention.unref();
    } else if (this.clients.size === 0) {
      this.ctx.onGone(this);
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
        replay_dropped_bytes: { ...this.replay.dropped },
      }),
    );
    if (this.exitCode !== null) {
      for (const c of this.replay.chunks)
        ws.send(this.spec.tty ? c.data : Buffer.concat([Buffer.from([c.stream]), c.data]));
      this.sendExit(ws);
      return;
    }
    this.clients.add(ws);
    for (const c of this.replay.chunks)
      this.send(ws, this.spec.tty ? c.data : Buffer.concat([Buffer.from([c.stream]), c.data]));
    ws.on('message', (data: Buffer, isBinary: boolean) => this.onInput(data, isBinary));
    ws.on('close', () => {
      this.clients.delete(ws);
      this.flowCheck();
      this.lastActivity = new Date();
      if (this.clients.size === 0) {
        if (this.exitCode === null && !this.spec.detachable) this.kill();
        else if (this.exitCode !== null && !this.spec.detachable) this.ctx.onGone(this);
      }
    });
  }

  private onInput(data: Buffer, isBinary: boolean): void {
    this.lastActivity = new Date();
    if (!isBinary) {
      let msg: { type?: unknown; rows?: unknown; cols?: unknown };
      try {
        msg = JSON.parse(data.toString('utf8'));
      } catch {
        return;
      }
      if (msg.type === 'resize' && this.spec.tty) {
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
          this.input?.resize(rows, cols);
        }
      }
      return;
    }
    if (this.spec.tty) {
      this.input?.write(data);
      return;
    }
    if (data.length === 0) return;
    if (data[0] === STREAM.stdin) this.input?.write(data.subarray(1));
    else if (data[0] === STREAM.stdinEof) this.input?.endInput();
  }

  /** Kills the session's whole process group (a shim then reports the exit). */
  kill(): void {
    if (this.exitCode !== null) return;
    if (this.proc) this.proc.kill();
    else killGroup(this.childPid);
  }

  /** Kills the session and its shim; resolves once the shim is gone (its directory may then be removed). */
  async dispose(): Promise<void> {
    this.letGo = true;
    if (this.retention) clearTimeout(this.retention);
    this.kill();
    this.shimLink?.destroy();
    for (const ws of this.clients) ws.close(1001, 'sandbox stopped');
    this.clients.clear();
    if (this.shim && this.shimAlive()) {
      try {
        process.kill(this.shim.pid, 'SIGKILL');
      } catch {}
      for (let i = 0; i < 200 && this.shimAlive(); i++) await sleep(5);
    }
  }

  /** sandboxd is stopping: a detachable session keeps running under its shim; others are killed. */
  detach(): void {
    if (this.shim && this.spec.detachable) {
      this.letGo = true;
      if (this.retention) clearTimeout(this.retention);
      this.shimLink?.destroy();
      for (const ws of this.clients) ws.close(1001, 'sandboxd stopping');
      this.clients.clear();
    } else {
      void this.dispose();
    }
  }
}

export class SessionTable {
  private readonly sessions = new Map<string, Session>();
  private readonly ctx: SessionContext;

  constructor(o: { bufferBytes: number; fifos: FifoPool; shims: ShimPool; dir: string; log: Logger }) {
    this.ctx = {
      ...o,
      onGone: (gone) => {
        if (this.sessions.get(gone.id) !== gone) return;
        this.sessions.delete(gone.id);
        if (gone.underShim) rmSync(gone.dir, { recursive: true, force: true });
      },
    };
  }

  create(spec: Omit<ExecSpec, 'argv' | 'env'>): Session {
    // A sandbox that runs execs will likely run a detachable one (a turn): have a shim ready by then.
    this.ctx.shims.warm();
    const s = new Session(spec, this.ctx);
    this.sessions.set(s.id, s);
    return s;
  }

  /** Forgets a session whose start failed. */
  remove(s: Session): void {
    if (this.sessions.get(s.id) === s) this.sessions.delete(s.id);
  }

  get(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  list(): SessionJson[] {
    return [...this.sessions.values()].map((s) => s.toJSON());
  }

  /** Finds the detachable sessions a previous sandboxd left: running shims and recorded results. */
  load(): void {
    let ids: string[] = [];
    try {
      ids = readdirSync(this.ctx.dir);
    } catch {}
    for (const id of ids) {
      const dir = path.join(this.ctx.dir, id);
      const file = readJson<SessionFile>(path.join(dir, 'session.json'));
      const result = readJson<ResultFile>(path.join(dir, 'result.json'));
      const shimAlive = file !== null && processStartTime(file.shim_pid) === file.shim_start;
      if (file && !file.detachable) {
        // A blocking TTY session of a sandboxd that died without killing it: its client is gone.
        if (shimAlive) killGroup(file.child_pid);
        if (shimAlive) killShim(file.shim_pid);
        rmSync(dir, { recursive: true, force: true });
        continue;
      }
      if (!file || file.id !== id || (!result && !shimAlive)) {
        this.ctx.log.warn('dropping an exec session without shim or result', { session: id });
        rmSync(dir, { recursive: true, force: true });
        continue;
      }
      if (result && Date.now() - new Date(result.exited_at).getTime() >= FINISHED_RETENTION_MS) {
        rmSync(dir, { recursive: true, force: true });
        continue;
      }
      const s = new Session(file, this.ctx);
      this.sessions.set(id, s);
      const output = result ? ReplayBuffer.parse(readFileSyncSafe(path.join(dir, 'output.bin'))) : [];
      s.adopt(file, result, output);
    }
  }

  /** Kills and forgets every session, shims included (sandbox stopped, restored or destroyed). */
  async clear(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map((s) => s.dispose()));
    rmSync(this.ctx.dir, { recursive: true, force: true });
  }

  /** sandboxd is stopping: detachable sessions keep running under their shims, the others are killed. */
  detachAll(): void {
    for (const s of this.sessions.values()) s.detach();
    this.sessions.clear();
  }
}

function readFileSyncSafe(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch {
    return Buffer.alloc(0);
  }
}
