/**
 * File writes into a sandbox (`PUT /v1/sandboxes/:name/fs/write`), with a few writes' process chains started
 * ahead of time per running sandbox (the "standbys").
 *
 * A write is a process chain: sandboxd forks (3–5 ms for a ~100 MB node process), the chain joins the
 * sandbox's cgroups, the host nsenter enters its namespaces, the sandbox's /bin/sh applies the environment
 * (EXEC_LOADER) and runs the write script (`cat`, `chmod`): 20–30 ms here, of which the script's own
 * processes are ~4 ms. A provisioning writes files on the path to a conversation's first byte (the env
 * file, skills, the setup script, a runtime's turn files), so a standby has everything up to the script
 * done before the write arrives: it waits inside the sandbox, reading the path, mode, "make parents" flag
 * and a new file's umask as four lines on its stdin, then the content until end of input
 * (docs/performance.md).
 *
 * Invariants:
 * - A standby and a fresh write run the same script, through the same argv and environment (the exec path
 *   of runtime/namespaces.ts: nothing of the sandbox's filesystem runs with privileges), as the sandbox
 *   user; only where the three arguments come from differs. Errors read the same.
 * - A standby holds nothing until it is taken: it learns its target with the write. It is the sandbox
 *   user's process like any exec (visible to `ps`, one pid of the sandbox's limit); what a sandbox process
 *   could do to it, it could do to the written file itself.
 * - A standby belongs to one init (pid and start time): it is taken only while that init is the sandbox's,
 *   and never after it exited. It dies with its sandbox (pid namespace) and ends, writing nothing, when its
 *   stdin ends without a whole header (sandboxd stopped or dropped it).
 * - A path with a newline (the header is lines) is written by a fresh chain with the path as an argument.
 * - Taking never waits for a standby to finish starting; refills start REFILL_DELAY_MS later, so they do
 *   not compete for the CPU with the writes that were just handed over.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { type InitHandle, sameInit } from '../runtime/namespaces.ts';

/**
 * The write, its arguments positional: $1 target, $2 mode (octal), $3 "1" to make missing parents, $4 the
 * umask that creates a new file with mode $2 exactly (empty when no umask can: execute or special bits).
 * A new file is created with its mode (`set -C`: O_EXCL, so a file that appeared since the test fails the
 * write instead of keeping its mode) and no `chmod` runs: one process fewer in the sandbox per write, on a
 * provisioning's path (the env file, a turn's files). Any other write is made private first (umask 077),
 * then given its mode.
 */
const WRITE_SCRIPT =
  // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansions, not a template
  'set -e; if [ "$3" = 1 ]; then d=${1%/*}; d=${d:-/}; [ -d "$d" ] || mkdir -p -- "$d"; fi; ' +
  'if [ -n "$4" ] && ! [ -e "$1" ] && ! [ -h "$1" ]; then umask "$4"; set -C; exec cat > "$1"; fi; ' +
  'umask 077; cat > "$1"; exec chmod "$2" "$1"';
/**
 * The standby: the same write, its arguments read as lines first (`read` takes a pipe one byte at a time,
 * so the content after the header stays on stdin for `cat`). No whole header: exit, nothing written.
 */
const STANDBY_SCRIPT = `IFS= read -r p && IFS= read -r m && IFS= read -r k && IFS= read -r u || exit 0; set -- "$p" "$m" "$k" "$u"; ${WRITE_SCRIPT}`;

/** The umask under which a new file gets `mode` (octal text) at its creation; '' when none does. */
export function creationUmask(mode: string): string {
  const m = Number.parseInt(mode, 8);
  return (m & ~0o666) === 0 ? (~m & 0o777).toString(8).padStart(3, '0') : '';
}

const REFILL_DELAY_MS = 100;
/**
 * Standbys per running sandbox: a turn writes its prompt and its runtime's config files at once (2–4), and
 * a write without a standby waits for a whole chain. Each is two small processes (the host nsenter and the
 * sandbox's sh), ~1 MB each.
 */
const STANDBYS = 3;

export interface WriteRequest {
  /** absolute path inside the sandbox */
  target: string;
  /** octal, validated */
  mode: string;
  mkdirs: boolean;
}

/** How a write's chain is spawned: the argv that runs `cmd` in the sandbox as its user, and its env. */
export interface WriteChain {
  argv(h: InitHandle, cmd: string[]): string[];
  env(): Record<string, string>;
}

interface Standby {
  child: ChildProcess;
  /** the init it was started in (pid and start time) */
  init: Pick<InitHandle, 'pid' | 'startTime'>;
}

/** Whether standby `s` runs in the sandbox of init `h`. */
const inInit = (s: Standby, h: InitHandle) => sameInit(s.init, h);

/** One sandbox's writes: its standbys, and fresh chains when there is none. */
export class FileWriter {
  private standbys: Standby[] = [];
  private refill: NodeJS.Timeout | null = null;
  private readonly chain: WriteChain;
  /** The sandbox's init while it runs (null: stopped, destroyed). */
  private readonly current: () => InitHandle | null;

  constructor(chain: WriteChain, current: () => InitHandle | null) {
    this.chain = chain;
    this.current = current;
  }

  /**
   * The sandbox's init runs: one standby now (a provisioning's next write is a few ms away), the others
   * after REFILL_DELAY_MS, when that write has had the CPU. Called as soon as a new init is up (its proxy
   * listener may still be opening) and again when the start is over: standbys of this init are kept, those
   * of an earlier one dropped.
   */
  started(): void {
    const h = this.current();
    if (this.standbys.some((s) => !h || !inInit(s, h))) this.drop();
    if (this.standbys.length > 0) return;
    this.fill(1);
    this.scheduleFill();
  }

  /** Drops the standbys (the sandbox stops or is destroyed): their stdin ends and they exit unused. */
  drop(): void {
    if (this.refill) clearTimeout(this.refill);
    this.refill = null;
    const gone = this.standbys;
    this.standbys = [];
    for (const s of gone) s.child.stdin?.end();
  }

  /** Writes `body` to the request's target in the sandbox of init `h`; resolves with the exit code. */
  async write(h: InitHandle, req: WriteRequest, body: Readable): Promise<{ code: number; stderr: string }> {
    // An exited standby has left the list already (fill).
    const i = req.target.includes('\n') ? -1 : this.standbys.findIndex((s) => inInit(s, h));
    let child: ChildProcess;
    if (i >= 0) {
      child = this.standbys.splice(i, 1)[0]!.child;
      child.ref();
      child.stdin!.write(
        `${req.target}\n${req.mode}\n${req.mkdirs ? '1' : '0'}\n${creationUmask(req.mode)}\n`,
      );
      this.scheduleFill();
    } else {
      child = this.spawn(h, [
        '/bin/sh',
        '-c',
        WRITE_SCRIPT,
        'fswrite',
        req.target,
        req.mode,
        req.mkdirs ? '1' : '0',
        creationUmask(req.mode),
      ]);
    }
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 2000) stderr += d.toString();
    });
    child.stdin!.on('error', () => {});
    body.pipe(child.stdin!);
    const code = await new Promise<number>((resolve) => {
      child.on('error', (err) => {
        stderr ||= err.message;
        resolve(1);
      });
      child.on('close', (c) => resolve(c ?? 1));
    });
    return { code, stderr };
  }

  private scheduleFill(): void {
    if (this.refill) clearTimeout(this.refill);
    this.refill = setTimeout(() => {
      this.refill = null;
      this.fill(STANDBYS);
    }, REFILL_DELAY_MS);
    this.refill.unref();
  }

  /** Starts standbys for the sandbox's running init until it has `n`. */
  private fill(n: number): void {
    const h = this.current();
    if (!h) return;
    this.standbys = this.standbys.filter((s) => inInit(s, h));
    while (this.standbys.length < n) {
      const child = this.spawn(h, ['/bin/sh', '-c', STANDBY_SCRIPT, 'fswrite']);
      const standby: Standby = { child, init: { pid: h.pid, startTime: h.startTime } };
      const gone = () => {
        this.standbys = this.standbys.filter((s) => s !== standby);
      };
      child.on('exit', gone);
      child.on('error', gone);
      // Not waited for by sandboxd: it never keeps the event loop (or a stopping sandboxd) alive.
      child.unref();
      this.standbys.push(standby);
    }
  }

  private spawn(h: InitHandle, cmd: string[]): ChildProcess {
    const argv = this.chain.argv(h, cmd);
    const child = spawn(argv[0]!, argv.slice(1), {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: this.chain.env(),
    });
    child.stdin!.on('error', () => {});
    child.stderr!.on('error', () => {}); // its 'close' ends the write
    // A chain that cannot be spawned (never on a healthy host) fails its write with the reason.
    child.on('error', () => {});
    return child;
  }
}
