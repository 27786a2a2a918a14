/**
 * Per-sandbox cgroups. Detected once at boot: cgroup v2 when the unified hierarchy has the memory/pids/cpu
 * controllers delegable, else the v1 controllers that are writable, else none (limits reported unavailable,
 * with a logged warning). Every sandbox process is placed into its cgroup before it execs (see spawnArgs).
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Limits } from '../config.ts';
import type { Logger } from '../log.ts';

export type CgroupMode = 'v2' | 'v1' | 'none';

export interface SandboxCgroup {
  /** cgroup.procs / tasks files a process must write its pid to (one per v1 controller). */
  procsFiles: string[];
  /** Freeze (true) or thaw (false); false when no freezer is available. */
  freeze(frozen: boolean): boolean;
  /** Pids currently in the sandbox cgroup. */
  pids(): number[];
  remove(): void;
}

export interface Cgroups {
  mode: CgroupMode;
  /** Which limits are actually enforced. */
  enforced: { memory: boolean; pids: boolean; cpu: boolean; freezer: boolean };
  create(key: string): SandboxCgroup | null;
  /**
   * sandboxd is stopping: removes its cgroup parent (one per v1 controller) when no sandbox cgroup is left
   * in it, so stopped daemons leave no empty directories behind. Sandboxes that outlive the daemon (they
   * survive a restart) keep the parent (rmdir answers EBUSY); the next start makes it again if needed.
   */
  release(): void;
}

/** Removes an empty cgroup directory; one that still has children or processes stays. */
function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {}
}

function tryWrite(file: string, value: string): boolean {
  try {
    writeFileSync(file, value);
    return true;
  } catch {
    return false;
  }
}

function selfPath(controller: string | null): string | null {
  const lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  for (const line of lines) {
    const [, ctrls, p] = line.split(':');
    if (p === undefined || ctrls === undefined) continue;
    if (controller === null ? line.startsWith('0::') : ctrls.split(',').includes(controller)) return p;
  }
  return null;
}

function readPids(file: string): number[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Polls `done` for up to 1 s. */
function waitFor(done: () => boolean): boolean {
  for (let i = 0; i < 200; i++) {
    try {
      if (done()) return true;
    } catch {
      return false;
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
  }
  return false;
}

function killAndRemove(dir: string, procs: string): void {
  for (let i = 0; i < 50; i++) {
    const pids = readPids(path.join(dir, procs));
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
  }
  removeIfEmpty(dir);
}

function detectV2(root: string, instance: string, limits: Limits, log: Logger): Cgroups | null {
  const unified = existsSync(path.join(root, 'cgroup.controllers'))
    ? root
    : existsSync(path.join(root, 'unified', 'cgroup.controllers'))
      ? path.join(root, 'unified')
      : null;
  if (!unified) return null;
  const self = selfPath(null);
  if (self === null) return null;
  const mine = path.join(unified, self);
  const available = readFileSync(path.join(mine, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
  const wanted = ['memory', 'pids', 'cpu'].filter((c) => available.includes(c));
  if (wanted.length === 0) return null;
  const parent = path.join(mine, `paddock-sandboxd-${instance}`);
  try {
    mkdirSync(parent, { recursive: true });
  } catch {
    return null;
  }
  // The parent of our subtree must not hold processes for controllers to be enabled in it; our own
  // cgroup may, so the subtree lives in a dedicated child that only contains sandbox cgroups.
  const enableIn = (dir: string) =>
    tryWrite(path.join(dir, 'cgroup.subtree_control'), wanted.map((c) => `+${c}`).join(' '));
  if (!enableIn(mine)) {
    const leaf = path.join(mine, 'paddock-sandboxd-self');
    try {
      mkdirSync(leaf, { recursive: true });
      writeFileSync(path.join(leaf, 'cgroup.procs'), String(process.pid));
    } catch {
      return null;
    }
    if (!enableIn(mine)) return null;
  }
  if (!enableIn(parent)) return null;
  const enforced = {
    memory: wanted.includes('memory'),
    pids: wanted.includes('pids'),
    cpu: wanted.includes('cpu'),
    freezer: true,
  };
  log.info('cgroups: using v2', { path: parent, controllers: wanted });
  return {
    mode: 'v2',
    enforced,
    create(key) {
      const dir = path.join(parent, key);
      try {
        mkdirSync(dir, { recursive: true });
      } catch (err) {
        log.warn('cgroups: cannot create sandbox cgroup', { err });
        return null;
      }
      if (enforced.memory && limits.memoryBytes > 0) {
        tryWrite(path.join(dir, 'memory.max'), String(limits.memoryBytes));
        tryWrite(path.join(dir, 'memory.swap.max'), '0');
      }
      if (enforced.pids && limits.pidsMax > 0) tryWrite(path.join(dir, 'pids.max'), String(limits.pidsMax));
      if (enforced.cpu && limits.cpus > 0)
        tryWrite(path.join(dir, 'cpu.max'), `${Math.round(limits.cpus * 100000)} 100000`);
      return {
        procsFiles: [path.join(dir, 'cgroup.procs')],
        // The write only requests the freeze: it holds once cgroup.events says so (checkpoints copy then).
        freeze: (frozen) =>
          tryWrite(path.join(dir, 'cgroup.freeze'), frozen ? '1' : '0') &&
          waitFor(() =>
            readFileSync(path.join(dir, 'cgroup.events'), 'utf8').includes(`frozen ${frozen ? 1 : 0}`),
          ),
        pids: () => readPids(path.join(dir, 'cgroup.procs')),
        remove: () => killAndRemove(dir, 'cgroup.procs'),
      };
    },
    release: () => removeIfEmpty(parent),
  };
}

function detectV1(root: string, instance: string, limits: Limits, log: Logger): Cgroups | null {
  const dirs = new Map<string, string>();
  for (const c of ['memory', 'pids', 'cpu', 'freezer']) {
    const mount = path.join(root, c);
    if (!existsSync(path.join(mount, 'cgroup.procs'))) continue;
    const self = selfPath(c) ?? '/';
    const parent = path.join(mount, self, `paddock-sandboxd-${instance}`);
    try {
      mkdirSync(parent, { recursive: true });
      dirs.set(c, parent);
    } catch {}
  }
  if (dirs.size === 0) return null;
  const enforced = {
    memory: dirs.has('memory'),
    pids: dirs.has('pids'),
    cpu: dirs.has('cpu'),
    freezer: dirs.has('freezer'),
  };
  log.info('cgroups: using v1', { controllers: [...dirs.keys()] });
  return {
    mode: 'v1',
    enforced,
    create(key) {
      const mine = new Map<string, string>();
      for (const [c, parent] of dirs) {
        const dir = path.join(parent, key);
        try {
          mkdirSync(dir, { recursive: true });
          mine.set(c, dir);
        } catch (err) {
          log.warn('cgroups: cannot create sandbox cgroup', { controller: c, err });
        }
      }
      const mem = mine.get('memory');
      if (mem && limits.memoryBytes > 0) {
        tryWrite(path.join(mem, 'memory.limit_in_bytes'), String(limits.memoryBytes));
        tryWrite(path.join(mem, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
      }
      const pids = mine.get('pids');
      if (pids && limits.pidsMax > 0) tryWrite(path.join(pids, 'pids.max'), String(limits.pidsMax));
      const cpu = mine.get('cpu');
      if (cpu && limits.cpus > 0) {
        tryWrite(path.join(cpu, 'cpu.cfs_period_us'), '100000');
        tryWrite(path.join(cpu, 'cpu.cfs_quota_us'), String(Math.round(limits.cpus * 100000)));
      }
      const freezer = mine.get('freezer');
      const anyDir = mine.get('pids') ?? mine.get('memory') ?? [...mine.values()][0];
      return {
        procsFiles: [...mine.values()].map((d) => path.join(d, 'cgroup.procs')),
        freeze: (frozen) => {
          if (!freezer) return false;
          if (!tryWrite(path.join(freezer, 'freezer.state'), frozen ? 'FROZEN' : 'THAWED')) return false;
          for (let i = 0; i < 200; i++) {
            const state = readFileSync(path.join(freezer, 'freezer.state'), 'utf8').trim();
            if (state === (frozen ? 'FROZEN' : 'THAWED')) return true;
            Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
          }
          return false;
        },
        pids: () => (anyDir ? readPids(path.join(anyDir, 'cgroup.procs')) : []),
        remove: () => {
          if (freezer) tryWrite(path.join(freezer, 'freezer.state'), 'THAWED');
          for (const d of mine.values()) killAndRemove(d, 'cgroup.procs');
        },
      };
    },
    release: () => {
      for (const parent of dirs.values()) removeIfEmpty(parent);
    },
  };
}

export function detectCgroups(
  limits: Limits,
  instance: string,
  log: Logger,
  root = '/sys/fs/cgroup',
): Cgroups {
  try {
    const v2 = detectV2(root, instance, limits, log);
    if (v2) return v2;
  } catch (err) {
    log.debug('cgroups: v2 unusable', { err });
  }
  try {
    const v1 = detectV1(root, instance, limits, log);
    if (v1) return v1;
  } catch (err) {
    log.debug('cgroups: v1 unusable', { err });
  }
  log.warn('cgroups: no writable cgroup tree; memory, CPU and pids limits are NOT enforced');
  return {
    mode: 'none',
    enforced: { memory: false, pids: false, cpu: false, freezer: false },
    create: () => null,
    release: () => {},
  };
}
