/**
 * Starting a session's process: with pipes (non-TTY) or a pty (TTY). Used by sandboxd itself (blocking
 * execs) and by session shims (detachable execs).
 *
 * Non-TTY stdio are FIFOs, not the socketpairs node's `stdio: 'pipe'` creates: a process can re-open its
 * stdio by path (`/dev/stdout` is `/proc/self/fd/1`), which fails with ENXIO on a socket. The FIFOs are made
 * ahead of time by FifoPool in the sandbox init's private directory (node has no mkfifo), mode 0666 so the
 * sandbox user may re-open them (anonymous pipes created by root would be 0600 root: EACCES), and unlinked as
 * soon as both ends are open: afterwards they are reachable only through the processes' own fds.
 *
 * One difference from an anonymous pipe: opening a named FIFO for reading waits for a writer, so re-opening
 * /dev/stdin after the client's stdin EOF (our writer closed) would hang. The stdin FIFO therefore stays
 * linked (in the init's private directory) until the process exits, and after EOF a writer is opened and closed every
 * STDIN_PULSE_MS: such an open then returns, reads what is left, and sees EOF.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, constants as fsc, openSync, rmSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type Pty from '@lydell/node-pty';
import { HOST_ENV } from '../runtime/host-tools.ts';

const execFileP = promisify(execFile);

/** After the main process exits, how long to wait for its output pipes to drain. */
const DRAIN_MS = 300;
/** See the module comment (re-opening /dev/stdin after EOF). */
const STDIN_PULSE_MS = 50;

/**
 * FIFOs of one sandbox, made ahead of time in the sandbox init's private FIFO directory: a tmpfs the init
 * mounted in its own mount namespace and detached when it switched roots, reached only through the init's
 * fd 9 (`/proc/<init pid>/fd/9`, see runtime/init.sh). A FIFO's path as a process sees it in
 * /proc/self/fd is then `/f<id> (deleted)`: no host path. A new init (restart) gives a new directory (use()).
 */
export class FifoPool {
  private dir: string | null = null;
  private readonly batch: number;
  private ready: string[] = [];
  private refilling: Promise<void> | null = null;
  private readonly mkfifo: string;

  /** `mkfifo`: the absolute path of the host's mkfifo (runtime/host-tools.ts). */
  constructor(mkfifo: string, batch = 16) {
    this.mkfifo = mkfifo;
    this.batch = batch;
  }

  /** Makes FIFOs in `dir` from now on (FIFOs made for an earlier directory are dropped). */
  use(dir: string): void {
    if (this.dir === dir) return;
    this.dir = dir;
    this.ready = [];
    this.refilling = null;
    void this.refill().catch(() => {});
  }

  /** n fresh FIFO paths; the caller opens and unlinks them (openFifos). */
  async take(n: number): Promise<string[]> {
    while (this.ready.length < n) await this.refill();
    const out = this.ready.splice(0, n);
    if (this.ready.length < this.batch / 2) void this.refill().catch(() => {});
    return out;
  }

  private refill(): Promise<void> {
    const dir = this.dir;
    if (dir === null) return Promise.reject(new Error('no FIFO directory (sandbox not started)'));
    if (!this.refilling) {
      // Random names: FIFOs left by an earlier sandboxd (a shim's linked stdin) stay where they are.
      const names = Array.from({ length: this.batch }, () =>
        path.join(dir, `f${randomBytes(8).toString('hex')}`),
      );
      const run = execFileP(this.mkfifo, ['-m', '666', '--', ...names], { env: HOST_ENV })
        .then(() => {
          if (this.dir === dir) this.ready.push(...names);
        })
        .finally(() => {
          if (this.refilling === run) this.refilling = null;
        });
      this.refilling = run;
    }
    return this.refilling;
  }
}

interface FifoStdio {
  /** fds for the child: stdin (or 'ignore'), stdout, stderr */
  child: [number | 'ignore', number, number];
  stdin: net.Socket | null;
  /** the stdin FIFO, still linked: remove it when the process is gone */
  stdinPath: string | null;
  stdout: net.Socket;
  stderr: net.Socket;
}

/**
 * Opens FIFOs `[stdout, stderr, stdin?]` (reader and writer ends, without ever blocking) and unlinks them.
 * The child's ends are blocking; the parent's are wrapped in sockets (libuv pipes).
 */
function openFifos(fifos: string[], withStdin: boolean): FifoStdio {
  const opened: number[] = [];
  let keepStdin = false;
  const open = (p: string, flags: number) => {
    const fd = openSync(p, flags);
    opened.push(fd);
    return fd;
  };
  try {
    const [outPath, errPath, inPath] = fifos;
    if (!outPath || !errPath || (withStdin && !inPath)) throw new Error('not enough FIFOs');
    // Reader first (O_NONBLOCK: it does not wait for a writer), then the writer finds a reader at once.
    const outR = open(outPath, fsc.O_RDONLY | fsc.O_NONBLOCK);
    const outW = open(outPath, fsc.O_WRONLY);
    const errR = open(errPath, fsc.O_RDONLY | fsc.O_NONBLOCK);
    const errW = open(errPath, fsc.O_WRONLY);
    let inR: number | 'ignore' = 'ignore';
    let inW = -1;
    if (withStdin && inPath) {
      // The child's read end must be blocking: a non-blocking reader first, then our writer, then the
      // blocking reader (a writer exists now), and the temporary reader goes.
      const tmp = openSync(inPath, fsc.O_RDONLY | fsc.O_NONBLOCK);
      try {
        inW = open(inPath, fsc.O_WRONLY | fsc.O_NONBLOCK);
        inR = open(inPath, fsc.O_RDONLY);
      } finally {
        closeSync(tmp);
      }
    }
    keepStdin = inW >= 0;
    return {
      child: [inR, outW, errW],
      stdin: inW >= 0 ? new net.Socket({ fd: inW, readable: false, writable: true }) : null,
      stdinPath: inW >= 0 ? (inPath ?? null) : null,
      stdout: new net.Socket({ fd: outR, readable: true, writable: false }),
      stderr: new net.Socket({ fd: errR, readable: true, writable: false }),
    };
  } catch (err) {
    for (const fd of opened) {
      try {
        closeSync(fd);
      } catch {}
    }
    throw err;
  } finally {
    // Unused FIFOs go too; the stdin FIFO only when it failed (see STDIN_PULSE_MS).
    for (const p of fifos) {
      if (keepStdin && p === fifos[2]) continue;
      try {
        unlinkSync(p);
      } catch {}
    }
  }
}

export interface Proc {
  /** host pid of the process; it leads its own process group */
  pid: number;
  write(data: Buffer): void;
  endInput(): void;
  resize(rows: number, cols: number): void;
  /**
   * Stops reading the process's output (backpressure: once its pipe or pty is full, the process blocks in
   * write). While paused, the exit is not reported: output written before the exit is never dropped.
   */
  pause(): void;
  resume(): void;
  /** Kills the process's whole group. */
  kill(): void;
}

export type OnOutput = (stream: number, data: Buffer) => void;
export type OnExit = (code: number) => void;

function signalCode(signal: string | null | undefined): number {
  if (!signal) return 0;
  const n = (osConstants.signals as Record<string, number>)[signal];
  return 128 + (n ?? 0);
}

function killGroup(pid: number): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {}
}

/**
 * Spawns argv in its own process group with stdout/stderr (and stdin when asked; /dev/null otherwise) on
 * the given FIFOs (`[stdout, stderr, stdin?]`, from FifoPool). onExit runs once, after the output
 * pipes closed or DRAIN_MS after the process exited (background processes may keep them open).
 */
export function spawnPiped(
  o: { argv: string[]; env: Record<string, string>; stdin: boolean; fifos: string[] },
  onOutput: OnOutput,
  onExit: OnExit,
): Proc {
  const [file, ...args] = o.argv;
  if (!file) throw new Error('empty argv');
  const io = openFifos(o.fifos, o.stdin);
  let child: ChildProcess;
  try {
    // cwd /: a shim works in its session directory on the host, which its process must not inherit.
    child = spawn(file, args, { detached: true, cwd: '/', env: o.env, stdio: io.child });
  } catch (err) {
    for (const s of [io.stdin, io.stdout, io.stderr]) s?.destroy();
    if (io.stdinPath) rmSync(io.stdinPath, { force: true });
    throw err;
  } finally {
    for (const fd of io.child) if (typeof fd === 'number') closeSync(fd);
  }
  const stdin = io.stdin;
  let stdinPath = io.stdinPath;
  const outs = [
    [1, io.stdout],
    [2, io.stderr],
  ] as const;
  const pid = child.pid ?? 0;
  stdin?.on('error', () => {});
  let open = 2;
  let exitCode: number | null = null;
  let finished = false;
  let pulse: NodeJS.Timeout | null = null;
  // After the exit, background processes may keep the pipes open: wait at most DRAIN_MS of reading time for
  // them (time spent paused does not count, so a slow client does not lose the process's last output).
  let paused = false;
  let drainLeft = DRAIN_MS;
  let drainFrom = 0;
  let drainTimer: NodeJS.Timeout | null = null;
  const startDrain = () => {
    if (exitCode === null || finished || paused || drainTimer) return;
    drainFrom = Date.now();
    drainTimer = setTimeout(() => {
      drainTimer = null;
      open = 0;
      done();
    }, drainLeft);
    drainTimer.unref();
  };
  const stopDrain = () => {
    if (!drainTimer) return;
    clearTimeout(drainTimer);
    drainTimer = null;
    drainLeft = Math.max(0, drainLeft - (Date.now() - drainFrom));
  };
  const removeStdin = () => {
    if (pulse) clearInterval(pulse);
    if (stdinPath) {
      try {
        unlinkSync(stdinPath);
      } catch {}
    }
    stdinPath = null;
  };
  const done = () => {
    if (exitCode !== null && open === 0 && !finished) {
      finished = true;
      onExit(exitCode);
    }
  };
  stdin?.on('close', () => {
    if (!stdinPath || exitCode !== null) return;
    const p = stdinPath;
    pulse = setInterval(() => {
      try {
        closeSync(openSync(p, fsc.O_WRONLY | fsc.O_NONBLOCK));
      } catch {}
    }, STDIN_PULSE_MS);
    pulse.unref();
  });
  for (const [stream, s] of outs) {
    s.on('data', (d: Buffer) => onOutput(stream, d));
    s.on('error', () => {});
    s.on('close', () => {
      open--;
      done();
    });
  }
  child.on('error', () => {
    removeStdin();
    exitCode = 127;
    open = 0;
    done();
  });
  child.on('exit', (code, signal) => {
    removeStdin();
    exitCode = code ?? signalCode(signal);
    startDrain();
    done();
  });
  return {
    pid,
    write: (d) => {
      stdin?.write(d);
    },
    endInput: () => {
      stdin?.end();
    },
    resize: () => {},
    pause: () => {
      paused = true;
      stopDrain();
      for (const [, out] of outs) out.pause();
    },
    resume: () => {
      paused = false;
      for (const [, out] of outs) out.resume();
      startDrain();
    },
    kill: () => killGroup(pid),
  };
}

/**
 * Spawns argv on a new pty (its own session and process group). `pty` is the node-pty module, passed in so
 * that a shim of a non-TTY session does not load it.
 */
export function spawnTty(
  pty: typeof Pty,
  o: { argv: string[]; env: Record<string, string>; rows: number; cols: number },
  onOutput: OnOutput,
  onExit: OnExit,
): Proc {
  const [file, ...args] = o.argv;
  if (!file) throw new Error('empty argv');
  const term = pty.spawn(file, args, {
    name: o.env['TERM'] ?? 'xterm-256color',
    cols: o.cols,
    rows: o.rows,
    cwd: '/',
    env: o.env,
    encoding: null,
  });
  term.onData((d: string | Buffer) => onOutput(0, typeof d === 'string' ? Buffer.from(d) : d));
  // The exit is reported 50 ms after node-pty's, and not while paused (the output before it comes first).
  // node-pty itself drops what the pty still holds if its socket is paused 200 ms after the exit.
  let paused = false;
  let exited: number | null = null;
  let reported = false;
  const report = () =>
    setTimeout(() => {
      if (paused || reported || exited === null) return;
      reported = true;
      onExit(exited);
    }, 50);
  term.onExit(({ exitCode, signal }) => {
    exited = signal ? 128 + signal : exitCode;
    report();
  });
  return {
    pid: term.pid,
    // node-pty's typings say string, but with encoding null it writes Buffers unchanged (raw bytes).
    write: (d) => term.write(d as unknown as string),
    endInput: () => {},
    resize: (rows, cols) => term.resize(cols, rows),
    pause: () => {
      paused = true;
      term.pause();
    },
    resume: () => {
      paused = false;
      term.resume();
      if (exited !== null) report();
    },
    kill: () => {
      killGroup(term.pid);
      try {
        term.kill('SIGKILL');
      } catch {}
    },
  };
}
