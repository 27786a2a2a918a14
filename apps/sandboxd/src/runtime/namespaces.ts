/**
 * Namespaces of one sandbox, held by a long-lived init process.
 *
 * Invariants (proved by test/isolation.test.ts):
 * - Root mode: the mount, pid, net, uts and ipc namespaces are created by host root, so every mount in them
 *   (overlay root, /dev, /proc) belongs to the host user namespace and cannot be changed from inside.
 *   Sandbox processes additionally live in their own user namespace (held by the "holder" process) where
 *   uid 0 and 1000 map to unprivileged host ids; host root is unmapped there, so setuid-root binaries of
 *   the base do not elevate and host-owned files grant only their "other" permission bits.
 * - Rootless mode: unshare maps the sandboxd user to root of a first user namespace that owns the other
 *   namespaces; sandbox processes run as uid 1000 of a nested user namespace without capabilities.
 * - Killing the init (pid 1 of the sandbox pid namespace) kills every sandbox process; the mount
 *   namespace and its overlay go away with the last of them.
 * - The init is detached from sandboxd (own session), so a sandboxd restart does not stop sandboxes;
 *   it is found again from the pid and start time recorded on disk.
 */
import { spawn } from 'node:child_process';
import { readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { BaseImage, IdMap } from './base.ts';
import { SANDBOX_UID } from './base.ts';

export interface InitHandle {
  /** host pid of the sandbox's pid-namespace init */
  pid: number;
  /** host pid of the process holding the sandbox user namespace */
  holderPid: number;
  /** the same process's pid inside the sandbox (rootless exec enters it from inside) */
  holderNsPid: number;
  /** /proc/<pid>/stat start time, to detect pid reuse */
  startTime: string;
}

export interface SandboxDirs {
  layer: string;
  work: string;
  merged: string;
}

const INIT_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'init.sh');
const LISTEN_HELPER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'listen-helper.ts');

/** Joins a process to the sandbox cgroup(s) before exec'ing the real command: `cgwrap N file... cmd...`. */
const CGWRAP = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n-1)); done; exec "$@"';

export function cgroupWrap(procsFiles: string[], argv: string[]): string[] {
  return ['/bin/sh', '-c', CGWRAP, 'cgwrap', String(procsFiles.length), ...procsFiles, ...argv];
}

export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

export function isAlive(h: InitHandle): boolean {
  return processStartTime(h.pid) === h.startTime;
}

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

function nsPid(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const line = status.split('\n').find((l) => l.startsWith('NSpid:'));
  const parts = line?.split(/\s+/).slice(1) ?? [];
  return Number(parts[parts.length - 1]);
}

export interface NamespaceRuntimeOptions {
  base: BaseImage;
  ids: IdMap;
  rootless: boolean;
}

export class NamespaceRuntime {
  readonly opts: NamespaceRuntimeOptions;
  constructor(opts: NamespaceRuntimeOptions) {
    this.opts = opts;
  }

  /** Starts the sandbox init; resolves once the filesystem, namespaces and user mapping are ready. */
  async start(dirs: SandboxDirs, procsFiles: string[]): Promise<InitHandle> {
    const unshareArgs = ['unshare'];
    if (this.opts.rootless) unshareArgs.push('--user', '--map-root-user');
    unshareArgs.push(
      '--mount',
      '--pid',
      '--fork',
      '--net',
      '--uts',
      '--ipc',
      '--propagation',
      'private',
      '--kill-child',
    );
    unshareArgs.push('/bin/sh', INIT_SCRIPT);
    const argv = cgroupWrap(procsFiles, unshareArgs);
    const child = spawn(argv[0]!, argv.slice(1), {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        SBX_LOWER: this.opts.base.lower,
        SBX_LAYER: dirs.layer,
        SBX_WORK: dirs.work,
        SBX_MERGED: dirs.merged,
        SBX_HOSTDIRS: this.opts.base.hostDirs.join(' '),
        SBX_ROOTLESS: this.opts.rootless ? '1' : '0',
      },
    });
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      if (err.length < 4096) err += d.toString();
    });
    const pid = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`sandbox init timed out: ${err.trim()}`));
      }, 10_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /ready (\d+)\n/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      child.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`sandbox init failed (exit ${code}): ${err.trim()}`));
      });
    });
    child.removeAllListeners('exit');
    child.on('exit', () => {});
    child.stdout.destroy();
    child.stderr.destroy();
    child.unref();
    const startTime = processStartTime(pid);
    if (startTime === null) throw new Error('sandbox init exited right after starting');
    // The holder is forked just before "ready"; wait until it has exec'd into its own user namespace.
    const initUserNs = safeReadlink(`/proc/${pid}/ns/user`);
    let holderPid = 0;
    for (let i = 0; i < 400 && holderPid === 0; i++) {
      for (const c of children(pid)) {
        const cmd = safeRead(`/proc/${c}/cmdline`);
        if (cmd.startsWith('sleep\0infinity') && safeReadlink(`/proc/${c}/ns/user`) !== initUserNs)
          holderPid = c;
      }
      if (holderPid === 0) await sleep(5);
    }
    if (holderPid === 0) {
      process.kill(pid, 'SIGKILL');
      throw new Error('sandbox user namespace holder did not start');
    }
    if (!this.opts.rootless) {
      const { rootHostId, userHostId } = this.opts.ids;
      const map = `0 ${rootHostId} 1\n${SANDBOX_UID} ${userHostId} 1\n`;
      writeFileSync(`/proc/${holderPid}/uid_map`, map);
      writeFileSync(`/proc/${holderPid}/gid_map`, map);
    }
    return { pid, holderPid, holderNsPid: nsPid(holderPid), startTime };
  }

  /** Kills every process of the sandbox and waits (bounded) for the init to disappear. */
  async stop(h: InitHandle): Promise<void> {
    if (!isAlive(h)) return;
    try {
      process.kill(h.pid, 'SIGKILL');
    } catch {}
    for (let i = 0; i < 200 && isAlive(h); i++) await sleep(5);
  }

  /**
   * argv that runs `cmd` inside the sandbox as the sandbox user, in `dir`.
   * `env -C` changes directory inside the sandbox root (nsenter's -w would resolve it on the host).
   */
  execArgv(h: InitHandle, cmd: string[], dir: string): string[] {
    const inner = ['env', '-C', dir, ...cmd];
    const ns = ['-t', String(h.pid), '-m', '-p', '-n', '-u', '-i', '-r'];
    if (this.opts.rootless) {
      return [
        'nsenter',
        `--user=/proc/${h.pid}/ns/user`,
        ...ns,
        '--preserve-credentials',
        '--',
        'nsenter',
        `--user=/proc/${h.holderNsPid}/ns/user`,
        '--preserve-credentials',
        '--',
        ...inner,
      ];
    }
    return [
      'nsenter',
      `--user=/proc/${h.holderPid}/ns/user`,
      ...ns,
      '-S',
      String(SANDBOX_UID),
      '-G',
      String(SANDBOX_UID),
      '--',
      ...inner,
    ];
  }

  /** argv that runs sandboxd's own node with the listen helper inside the sandbox network namespace only. */
  listenHelperArgv(h: InitHandle): string[] {
    const userns = this.opts.rootless ? [`--user=/proc/${h.pid}/ns/user`, '--preserve-credentials'] : [];
    return ['nsenter', ...userns, `--net=/proc/${h.pid}/ns/net`, '--', process.execPath, LISTEN_HELPER];
  }
}

function safeRead(p: string): string {
  try {
    return readFileSync(p, 'utf8');
  } catch {
    return '';
  }
}

function safeReadlink(p: string): string {
  try {
    return readlinkSync(p);
  } catch {
    return '';
  }
}
