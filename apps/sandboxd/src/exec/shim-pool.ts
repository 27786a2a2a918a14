/**
 * Pre-started session shims: a detachable exec adopts a shim that already runs, instead of waiting for a
 * new node process to start and load shim.ts (~150 ms, most of it node and its TypeScript loader; a plain
 * exec answers in ~25 ms). A turn of a conversation is a detachable exec, so this is on the path from a
 * prompt to its first output byte (docs/performance.md).
 *
 * A pooled shim is an ordinary shim that has not been told its session yet: it waits on its stdin for
 * the session (shim-protocol.ts ShimStart), exactly as a shim spawned for one session does, so a pooled
 * and a fresh shim behave the same from there on (same code path, same files, same restart survival).
 *
 * Invariants:
 * - A pooled shim holds nothing of any session until it is taken: no secret, no directory, no process.
 *   It is sandbox-agnostic (host environment HOST_ENV, cwd /), so one pool serves every sandbox.
 * - A pooled shim never outlives sandboxd: its stdin is sandboxd's pipe, and a shim whose stdin ends
 *   without a session exits (shim.ts); close() kills the idle ones at once. Test: "a stopped sandboxd
 *   leaves no idle shim behind" (test/sessions-restart.test.ts).
 * - A read or write error on a pooled shim's pipes costs that shim, never sandboxd: every pipe has an
 *   'error' listener (an uncaught one would end the daemon and every session it serves), and an idle shim
 *   whose stdout fails is killed, which takes it out of the pool. Test: "kills an idle shim whose stdout
 *   fails to read, and goes on with a fresh one" (test/shim-pool.test.ts).
 * - Taking never waits for a pooled shim to finish starting: a shim still starting is at least as far
 *   along as one spawned now. An empty pool spawns a fresh shim (the pool is an accelerator, never a
 *   limit on concurrent sessions).
 * - Refills start REFILL_DELAY_MS after a take, so a new node process does not compete for the CPU with
 *   the session that was just started (its first output byte is what is being waited for).
 * - With `lowPriority` (sandboxd as root), a pooled shim starts at nice 19, so its start-up (~150 ms of
 *   CPU) only takes what sessions leave idle, and it is back at nice 0 (every thread) before it is handed
 *   a session: the session's processes, forked by the shim, run at normal priority. Without the privilege
 *   to raise a priority again (rootless), shims start at normal priority.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../log.ts';
import { HOST_ENV } from '../runtime/host-tools.ts';
import { SHIM_MARK } from './shim-protocol.ts';

const SHIM_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'shim.ts');
/**
 * Idle shims kept per sandboxd (~50 MB each). Two: a follow-up prompt right after a turn finds one that has
 * been idle a while, even when the refill after the first turn is still starting on a busy host (node takes
 * 0.3–2 s to load there); a burst beyond that spawns fresh ones.
 */
export const SHIM_POOL_SIZE = 2;
const REFILL_DELAY_MS = 250;
/** The nice value of a pooled shim while it waits (lowPriority). */
const IDLE_NICE = 19;

/** Sets the nice value of every thread of `pid` (Linux keeps one per thread); best effort. */
function renice(pid: number | undefined, nice: number): void {
  if (!pid) return;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return;
  }
  for (const tid of tids) {
    try {
      os.setPriority(Number(tid), nice);
    } catch {}
  }
}

export class ShimPool {
  private readonly idle = new Set<ChildProcess>();
  private readonly size: number;
  private readonly compileCache: string;
  private readonly log: Logger;
  private readonly lowPriority: boolean;
  private refill: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(o: { size?: number; compileCache: string; log: Logger; lowPriority?: boolean }) {
    this.size = o.size ?? SHIM_POOL_SIZE;
    this.lowPriority = o.lowPriority === true;
    this.compileCache = o.compileCache;
    this.log = o.log;
  }

  /** A shim waiting for its session: a pooled one when there is one, else a fresh one. */
  take(): ChildProcess {
    const pooled = this.idle.values().next().value;
    let child: ChildProcess;
    if (pooled) {
      this.idle.delete(pooled);
      if (this.lowPriority) renice(pooled.pid, 0);
      pooled.removeAllListeners('exit');
      pooled.ref();
      (pooled.stdin as net.Socket | null)?.ref();
      (pooled.stdout as net.Socket | null)?.ref();
      child = pooled;
    } else {
      child = this.spawnShim();
    }
    this.warm(REFILL_DELAY_MS);
    return child;
  }

  /** Fills the pool after `delayMs` (idempotent; sandboxd calls it when a sandbox starts execs). */
  warm(delayMs = 0): void {
    if (this.closed || this.refill || this.idle.size >= this.size) return;
    this.refill = setTimeout(() => {
      this.refill = null;
      while (!this.closed && this.idle.size < this.size) this.addIdle();
    }, delayMs);
    this.refill.unref();
  }

  /** Kills the idle shims (sandboxd is stopping); shims already taken are sessions and keep running. */
  close(): void {
    this.closed = true;
    if (this.refill) clearTimeout(this.refill);
    this.refill = null;
    for (const child of this.idle) {
      child.removeAllListeners('exit');
      try {
        child.kill('SIGKILL');
      } catch {}
      child.stdin?.destroy();
      child.stdout?.destroy();
    }
    this.idle.clear();
  }

  private addIdle(): void {
    let child: ChildProcess;
    try {
      child = this.spawnShim();
    } catch (err) {
      this.log.warn('cannot pre-start a session shim', { error: String(err) });
      return;
    }
    // At once, before node starts its threads: they inherit the nice value of the thread creating them.
    if (this.lowPriority) renice(child.pid, IDLE_NICE);
    this.idle.add(child);
    child.once('exit', (code) => {
      // An idle shim only exits when killed or broken: do not respawn in a loop, the next take refills.
      this.idle.delete(child);
      this.log.warn('an idle session shim exited', { code });
    });
    // An idle shim does not keep sandboxd's event loop alive.
    child.unref();
    (child.stdin as net.Socket | null)?.unref();
    (child.stdout as net.Socket | null)?.unref();
  }

  private spawnShim(): ChildProcess {
    const child = spawn(process.execPath, [SHIM_SCRIPT, SHIM_MARK], {
      detached: true,
      cwd: '/',
      stdio: ['pipe', 'pipe', 'ignore'],
      env: { ...HOST_ENV, NODE_COMPILE_CACHE: this.compileCache },
    });
    // A read or write error on a shim's pipes (never on a healthy host) must not end sandboxd: an idle
    // shim whose stdout broke is useless and is killed (its exit takes it out of the pool); a taken one's
    // link handles its close (sessions.ts).
    child.stdin!.on('error', () => {});
    child.stdout!.on('error', () => {
      if (this.idle.has(child)) child.kill('SIGKILL');
    });
    child.on('error', () => {});
    return child;
  }
}
