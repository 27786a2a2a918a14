/**
 * Session shim: the supervisor of one detachable or TTY exec session, so a detachable session outlives
 * sandboxd, and sandboxd itself never holds a pty (node-pty opens its master without close-on-exec: every
 * process sandboxd spawned while a TTY session was open, in any sandbox, would inherit it).
 *
 *   node shim.ts paddock-sandboxd-shim      (ShimSpec JSON and a newline on stdin, then socket frames)
 *
 * sandboxd starts it detached (own session and process group; reparented when sandboxd exits), usually
 * ahead of time (shim-pool.ts): it loads, then waits for its session on stdin; a stdin that ends before a
 * whole session line means sandboxd let it go unused, and it exits. Given a session, it moves into the
 * session directory (its cwd: that is how an operator or a test tells which session a shim serves), starts
 * the session's process (its pipes or pty) and keeps its replay buffer. Its stdio with sandboxd is then the
 * first connection (shim-protocol.ts: HELLO at once, output as it comes, the exit), so the first output byte
 * waits for no socket; then it serves `<session dir>/shim.sock` to whichever sandboxd connects later: a
 * restarted sandboxd finds it again from session.json. When the process has exited it writes output.bin
 * and result.json, sends the exit to the connected sandboxd and exits: a finished session needs no process.
 *
 * Invariants: the environment (secrets) is never written to disk; everything the shim creates lives in the
 * session directory; the session's process starts in / (procs.ts), not in the shim's cwd; the shim never
 * outlives its process by more than a few seconds; sandboxd exiting (its end of the stdio gone) is a
 * connection closing, never the session's end.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { closeInheritedFds } from '../runtime/host-tools.ts';
import { type Proc, spawnPiped, spawnTty } from './procs.ts';
import {
  FrameDecoder,
  frame,
  MSG,
  OUTPUT_HIGH_WATER,
  OUTPUT_LOW_WATER,
  ReplayBuffer,
  type ResultFile,
  type SessionFile,
  SHIM_MARK,
  type ShimHello,
  type ShimSpec,
  socketPathVia,
} from './shim-protocol.ts';

if (process.argv[2] !== SHIM_MARK) {
  process.stderr.write(`usage: shim.ts ${SHIM_MARK} (session on stdin)\n`);
  process.exit(2);
}
// Whatever sandboxd (or whoever started this shim) left open without close-on-exec would reach the session.
closeInheritedFds();
/** The session directory, once the session is known. */
let dir = '';

function logError(msg: string, err?: unknown): void {
  if (!dir) return;
  try {
    writeFileSync(
      path.join(dir, 'shim.log'),
      `${new Date().toISOString()} ${msg}${err ? `: ${err instanceof Error ? err.stack : String(err)}` : ''}\n`,
      { flag: 'a' },
    );
  } catch {}
}
process.on('uncaughtException', (err) => {
  logError('uncaught', err);
  process.exit(70);
});
// sandboxd going away must not stop the session.
process.on('SIGHUP', () => {});

function writeAtomic(name: string, data: string | Buffer): void {
  const file = path.join(dir, name);
  writeFileSync(`${file}.tmp`, data, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

function startTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

/**
 * While it waits for its session, a shim runs the paths a session takes once (a spawn whose output it reads,
 * the framing of output): the first call of each makes V8 compile it, and a pooled shim's session would pay
 * that between its process's first output byte and sandboxd (docs/performance.md, detachable exec). Nothing
 * of any session is involved: a shell that prints a byte, and frames of it.
 */
function warmUp(): void {
  try {
    const child = spawn('/bin/sh', ['-c', 'echo .'], {
      cwd: '/',
      env: {},
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    child.on('error', () => {});
    child.stdout.on('error', () => {});
    child.stdout.on('data', (d: Buffer) => {
      const warm = new ReplayBuffer(1024);
      warm.push(1, d);
      new FrameDecoder(() => {}).push(frame(MSG.output, Buffer.concat([Buffer.from([1]), d])));
    });
  } catch {}
}
warmUp();

// stdin and stdout are socketpairs with sandboxd (node's `stdio: 'pipe'`): wrapped here rather than through
// process.stdin/stdout, whose writes to a pipe block on Linux (a slow sandboxd must pause the process, not
// the shim: OUTPUT_HIGH_WATER).
const fromSandboxd = new net.Socket({ fd: 0, readable: true, writable: false });
fromSandboxd.on('error', () => {});
/** The session line, and the frames sandboxd sent right after it (read before the decoder exists). */
const { line, rest } = await new Promise<{ line: Buffer | null; rest: Buffer }>((resolve) => {
  let got: Buffer = Buffer.alloc(0);
  const onData = (d: Buffer) => {
    got = got.length === 0 ? d : Buffer.concat([got, d]);
    const newline = got.indexOf(10);
    if (newline < 0) return;
    fromSandboxd.off('data', onData).off('end', onEnd).pause();
    resolve({ line: got.subarray(0, newline), rest: got.subarray(newline + 1) });
  };
  const onEnd = () => resolve({ line: null, rest: Buffer.alloc(0) });
  fromSandboxd.on('data', onData).on('end', onEnd);
});
// An idle pooled shim let go (sandboxd stopped, or closed its pool): nothing to supervise.
if (line === null) process.exit(0);
const spec = JSON.parse(line.toString('utf8')) as ShimSpec;
if (!path.isAbsolute(spec.dir)) process.exit(2);
dir = spec.dir;
process.chdir(dir);

const replay = new ReplayBuffer(spec.bufferBytes);
const conns = new Set<net.Socket>();
let lastActivity = new Date();
let exited = false;

function onOutput(stream: number, data: Buffer): void {
  lastActivity = new Date();
  replay.push(stream, data);
  if (conns.size === 0) return;
  const m = frame(MSG.output, Buffer.concat([Buffer.from([stream]), data]));
  for (const c of conns) send(c, m);
}

// Flow control (OUTPUT_HIGH_WATER in shim-protocol.ts): a sandboxd that stops reading (its own clients are
// slow) pauses the process instead of growing this shim's memory.
let outputPaused = false;
function send(c: net.Socket, m: Buffer): void {
  c.write(m);
  if (!outputPaused && c.writableLength > OUTPUT_HIGH_WATER) {
    outputPaused = true;
    proc?.pause();
  }
}
function flowCheck(): void {
  if (!outputPaused) return;
  for (const c of conns) if (c.writableLength > OUTPUT_LOW_WATER) return;
  outputPaused = false;
  proc?.resume();
}

function onExit(code: number): void {
  if (exited) return;
  exited = true;
  const result: ResultFile = {
    exit_code: code,
    exited_at: new Date().toISOString(),
    last_activity: lastActivity.toISOString(),
    dropped: { ...replay.dropped },
  };
  try {
    writeAtomic('output.bin', replay.serialize());
    writeAtomic('result.json', `${JSON.stringify(result)}\n`);
  } catch (err) {
    logError('cannot persist the result', err);
  }
  server.close();
  try {
    unlinkSync(path.join(dir, 'shim.sock'));
  } catch {}
  const m = frame(MSG.exit, JSON.stringify({ exit_code: code }));
  for (const c of conns) c.end(m);
  if (conns.size === 0) process.exit(0);
  setTimeout(() => process.exit(0), 5000).unref();
}

let proc: Proc | null = null;

/**
 * Serves one sandboxd connection: `out` gets HELLO, the kept output and then live output and the exit;
 * `input` (the same socket, or the stdin pair) carries sandboxd's frames, `head` the first of them.
 */
function serve(out: net.Socket, input: net.Socket, head?: Buffer): void {
  if (exited) {
    out.destroy();
    return;
  }
  conns.add(out);
  out.on('error', () => {});
  out.on('drain', flowCheck);
  out.on('close', () => {
    conns.delete(out);
    flowCheck();
    if (exited && conns.size === 0) process.exit(0);
  });
  const hello: ShimHello = {
    child_pid: proc?.pid ?? 0,
    dropped: { ...replay.dropped },
    last_activity: lastActivity.toISOString(),
  };
  const parts = [frame(MSG.hello, JSON.stringify(hello))];
  for (const ch of replay.chunks)
    parts.push(frame(MSG.output, Buffer.concat([Buffer.from([ch.stream]), ch.data])));
  send(out, Buffer.concat(parts));
  const decoder = new FrameDecoder((type, payload) => {
    if (type === MSG.stdin) proc?.write(payload);
    else if (type === MSG.stdinEof) proc?.endInput();
    else if (type === MSG.resize) {
      const { rows, cols } = JSON.parse(payload.toString('utf8')) as { rows: number; cols: number };
      proc?.resize(rows, cols);
    }
  });
  if (head && head.length > 0) decoder.push(head);
  input.on('data', (d: Buffer) => decoder.push(d));
  if (input !== out) {
    // The stdin pair ending is sandboxd gone: the same as its connection closing.
    input.on('error', () => {});
    input.on('end', () => out.destroy());
    input.resume();
  }
}

const server = net.createServer((c) => serve(c, c));
server.on('error', (err) => {
  logError('socket server', err);
  proc?.kill();
  process.exit(71);
});

// The process starts first (its start-up is what a session's first output byte waits for), then the
// connections. The stdin FIFO stays linked while the process runs (procs.ts), in the sandbox init's FIFO
// directory, which a restarted sandboxd leaves alone.
const fifos = [...spec.fifos];
proc = spec.tty
  ? spawnTty(
      (await import('@lydell/node-pty')).default,
      { argv: spec.argv, env: spec.env, rows: spec.rows, cols: spec.cols },
      onOutput,
      onExit,
    )
  : spawnPiped({ argv: spec.argv, env: spec.env, stdin: spec.stdin, fifos }, onOutput, onExit);
// sandboxd's first connection: its stdio, at once (HELLO carries the process's pid; sandboxd answers the exec
// on it). Then the socket, for later connections: bound at once, its callback on the next tick, so no exit
// or output event of the process (I/O, later in the loop) comes before it is up.
serve(new net.Socket({ fd: 1, readable: false, writable: true }), fromSandboxd, rest);
const dirFd = openSync(dir, 'r');
await new Promise<void>((resolve) => server.listen(socketPathVia(dirFd, 'shim.sock'), resolve));
closeSync(dirFd);
const file: SessionFile = {
  id: spec.id,
  command: spec.command,
  created: spec.created,
  tty: spec.tty,
  rows: spec.rows,
  cols: spec.cols,
  stdin: spec.stdin,
  detachable: spec.detachable,
  shim_pid: process.pid,
  shim_start: startTime(process.pid),
  child_pid: proc.pid,
};
writeAtomic('session.json', `${JSON.stringify(file)}\n`);
