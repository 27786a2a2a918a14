/**
 * What sandboxes leave on the machine when nothing removes them, found from the kernel rather than from
 * sandboxd's records: sandbox inits (src/runtime/namespaces.ts) and loop devices of disk images
 * (src/runtime/disks.ts) whose files lie under a directory.
 *
 * A record can miss a running init: a sandboxd stopped between spawning an init and recording it, or a
 * sandbox directory (its record) removed while an init of it still ran. By design such an init outlives
 * every sandboxd (it is detached), so the test harness (harness.ts stop()) kills what these find in its data
 * dir, and `npm test` (scripts/test.ts) fails a run that leaves any under its own directory.
 *
 * An init is the `unshare … sh -c 'eval "$SBX_INIT"' sandbox-init` process sandboxd spawns and the sh it
 * forks (pid 1 of the sandbox, which takes every process of the sandbox with it); both keep the environment
 * sandboxd gave them, where SBX_MERGED is `<data dir>/tenants/<t>/sandboxes/<name>/merged` (host paths are
 * never changed by the launch, test/harness.ts sandboxdLaunch). That path tells the inits of one data dir, or
 * of one test run, from those of any other run or benchmark on the machine.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { initsUnder } from '../src/runtime/namespaces.ts';
import { hostBin } from './host-bin.ts';

export interface SandboxInit {
  /** The sandbox's pid 1 on the host (the unshare process while it has not forked yet). */
  pid: number;
  /** Every process of the init: the unshare and its child. */
  pids: number[];
  /** The sandbox's directory (its state directory, in its sandboxd's data dir). */
  sandboxDir: string;
  /** When the init was spawned. */
  startedAt: Date;
}

/** USER_HZ, the unit of /proc/<pid>/stat times: 100 on every architecture Linux runs on. */
const USER_HZ = 100;

/** `root` and its real path (a temp dir may be reached through a symlink), each with a trailing slash. */
function prefixes(root: string): string[] {
  const given = path.resolve(root);
  let real = given;
  try {
    real = realpathSync(given);
  } catch {}
  return [...new Set([given, real])].map((p) => (p.endsWith('/') ? p : `${p}/`));
}

function bootTime(): number {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('btime '));
  return Number(line?.split(' ')[1] ?? 0);
}

/**
 * Running (not zombie) sandbox inits whose sandbox lies under `root` (or its real path), through the scan
 * a restarted sandboxd uses to find inits no record claims (src/runtime/namespaces.ts initsUnder).
 */
export function sandboxInitsUnder(root: string): SandboxInit[] {
  const btime = bootTime();
  const inits = new Map<number, SandboxInit>();
  for (const prefix of prefixes(root)) {
    for (const found of initsUnder(prefix)) {
      const [unshare, child] = found.procs;
      if (!unshare) continue;
      inits.set(unshare.pid, {
        pid: child?.pid ?? unshare.pid,
        pids: found.procs.map((p) => p.pid),
        sandboxDir: found.sandboxDir,
        startedAt: new Date((btime + Number(unshare.startTime) / USER_HZ) * 1000),
      });
    }
  }
  return [...inits.values()];
}

function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * SIGKILLs every sandbox init under `root` and waits (bounded) until they are gone, so their mount namespaces,
 * and with them their overlays and disk images, are released. Returns what it killed.
 */
export async function killSandboxInitsUnder(root: string): Promise<SandboxInit[]> {
  const found = sandboxInitsUnder(root);
  const pids = found.flatMap((init) => [...init.pids].reverse());
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  for (let i = 0; i < 250 && pids.some(running); i++) await sleep(20);
  return found;
}

/** Loop devices (`/dev/loopN`) whose backing file lies under `root` (removed files included). */
function loopDevicesUnder(root: string): { device: string; file: string }[] {
  const under = prefixes(root);
  let names: string[] = [];
  try {
    names = readdirSync('/sys/block').filter((n) => /^loop\d+$/.test(n));
  } catch {}
  const found: { device: string; file: string }[] = [];
  for (const n of names) {
    let file = '';
    try {
      file = readFileSync(`/sys/block/${n}/loop/backing_file`, 'utf8').trim();
    } catch {
      continue; // not attached
    }
    if (under.some((p) => file.startsWith(p))) found.push({ device: `/dev/${n}`, file });
  }
  return found;
}

/**
 * Detaches the loop devices of files under `root` (root only; a device still mounted somewhere is detached by
 * the kernel once it is unmounted). Returns what it found.
 */
export function detachLoopDevicesUnder(root: string): { device: string; file: string }[] {
  const found = loopDevicesUnder(root);
  for (const { device } of found) {
    try {
      execFileSync(hostBin('losetup'), ['-d', device], { stdio: 'ignore' });
    } catch {}
  }
  return found;
}
