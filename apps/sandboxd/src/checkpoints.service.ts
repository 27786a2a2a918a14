/**
 * Checkpoints of a sandbox's writable layer: create, list, restore.
 *
 * State on disk: <data>/tenants/<tenant>/checkpoints/<id>/{checkpoint.json,layer/}. A checkpoint belongs to
 * the token (tenant) and can be restored into any of its sandboxes.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { AppError } from './errors.ts';
import type { Logger } from './log.ts';
import type { SandboxCgroup } from './runtime/cgroups.ts';
import { type InitHandle, isAlive } from './runtime/namespaces.ts';
import { removeTree, writeJsonAtomic } from './state-files.ts';

const execFileP = promisify(execFile);
const CHECKPOINT_RE = /^ckpt-[0-9a-f]{16}$/;

export interface NdjsonLine {
  type: 'info' | 'stdout' | 'stderr' | 'error';
  [k: string]: unknown;
}
export type Emit = (line: NdjsonLine) => void;

/** What checkpoints use of a sandbox (the Sandbox of sandboxes.service.ts). */
export interface CheckpointedSandbox {
  readonly rec: { name: string; init: InitHandle | null };
  readonly cgroup: SandboxCgroup | null;
  readonly dir: string;
  readonly layer: string;
  readonly work: string;
  /** Runs fn after every earlier lifecycle operation of this sandbox finished. */
  locked<T>(fn: () => Promise<T>): Promise<T>;
}

export interface CheckpointsDeps<S extends CheckpointedSandbox> {
  tenantsDir: string;
  log: Logger;
  rootless: boolean;
  /** The tenant's sandbox; throws sandbox_not_found. */
  find(tenant: string, name: string): S;
  /** Creates the writable layer's directories (under the sandbox lock). */
  prepareLayer(sb: S): void;
  /** Stops every process and session of the sandbox (under the sandbox lock). */
  stop(sb: S): Promise<void>;
  /** Starts the sandbox (under the sandbox lock). */
  start(sb: S): Promise<unknown>;
}

export function createCheckpointsService<S extends CheckpointedSandbox>(deps: CheckpointsDeps<S>) {
  const { tenantsDir, log, find, prepareLayer, stop, start } = deps;

  return {
    list(tenant: string, name: string) {
      find(tenant, name);
      const dir = path.join(tenantsDir, tenant, 'checkpoints');
      let ids: string[] = [];
      try {
        ids = readdirSync(dir).filter((d) => CHECKPOINT_RE.test(d));
      } catch {}
      const out = [];
      for (const id of ids) {
        try {
          out.push(JSON.parse(readFileSync(path.join(dir, id, 'checkpoint.json'), 'utf8')));
        } catch {}
      }
      return { checkpoints: out.sort((a, b) => String(a.create_time).localeCompare(String(b.create_time))) };
    },

    async create(tenant: string, name: string, emit: Emit): Promise<void> {
      const sb = find(tenant, name);
      await sb.locked(async () => {
        const id = `ckpt-${randomBytes(8).toString('hex')}`;
        const dir = path.join(tenantsDir, tenant, 'checkpoints', id);
        const t0 = performance.now();
        emit({ type: 'info', data: 'Creating checkpoint...', time: new Date().toISOString() });
        const paused = pause(sb);
        emit({ type: 'info', data: `Processes ${paused.how}`, time: new Date().toISOString() });
        try {
          prepareLayer(sb); // a checkpoint taken before the background setup ran
          await fs.mkdir(dir, { recursive: true });
          await copyTree(sb.layer, path.join(dir, 'layer'));
        } catch (err) {
          await removeTree(dir);
          throw err;
        } finally {
          paused.resume();
        }
        const meta = { id, create_time: new Date().toISOString(), source_sandbox: name };
        writeJsonAtomic(path.join(dir, 'checkpoint.json'), meta);
        const ms = Math.round(performance.now() - t0);
        log.info('checkpoint created', { sandbox: name, checkpoint: id, ms });
        emit({
          type: 'info',
          data: `Checkpoint ${id} created`,
          checkpoint_id: id,
          id,
          time: new Date().toISOString(),
        });
      });
    },

    /** Throws checkpoint_not_found before any streaming starts. */
    assertExists(tenant: string, id: string): void {
      if (!CHECKPOINT_RE.test(id))
        throw new AppError('checkpoint_not_found', `checkpoint ${JSON.stringify(id)} not found`);
      try {
        readFileSync(path.join(tenantsDir, tenant, 'checkpoints', id, 'checkpoint.json'));
      } catch {
        throw new AppError('checkpoint_not_found', `checkpoint ${JSON.stringify(id)} not found`);
      }
    },

    async restore(tenant: string, name: string, id: string, emit: Emit): Promise<void> {
      const sb = find(tenant, name);
      const src = path.join(tenantsDir, tenant, 'checkpoints', id, 'layer');
      await sb.locked(async () => {
        const t0 = performance.now();
        emit({
          type: 'info',
          data: `Restoring checkpoint ${id}...`,
          checkpoint_id: id,
          time: new Date().toISOString(),
        });
        await stop(sb);
        emit({ type: 'info', data: 'Sandbox processes stopped', time: new Date().toISOString() });
        const staged = `${sb.layer}.restore-${randomBytes(4).toString('hex')}`;
        await copyTree(src, staged);
        const trash = path.join(sb.dir, `trash-${randomBytes(4).toString('hex')}`);
        await fs.mkdir(trash);
        await fs.rename(sb.layer, path.join(trash, 'layer'));
        await fs.rename(sb.work, path.join(trash, 'work')).catch(() => {});
        await fs.rename(staged, sb.layer);
        void removeTree(trash).catch((err: unknown) =>
          log.warn('cannot remove the replaced layer', { sandbox: name, err }),
        );
        await start(sb);
        log.info('checkpoint restored', {
          sandbox: name,
          checkpoint: id,
          ms: Math.round(performance.now() - t0),
        });
        emit({
          type: 'info',
          data: `Checkpoint ${id} restored`,
          checkpoint_id: id,
          time: new Date().toISOString(),
        });
      });
    },
  };

  /**
   * cp -a of a writable layer. Rootless, in a user namespace that maps sandboxd's uid to root: its
   * CAP_DAC_OVERRIDE covers the layer's files (all owned by that uid), so files and directories the sandbox
   * made unreadable (chmod 000) are copied too.
   */
  function copyTree(src: string, dst: string): Promise<unknown> {
    const cp = ['cp', '-a', '--', src, dst];
    return deps.rootless
      ? execFileP('unshare', ['--user', '--map-root-user', '--', ...cp])
      : execFileP(cp[0]!, cp.slice(1));
  }

  /** Freezes the sandbox (cgroup freezer) or, failing that, SIGSTOPs its processes. */
  function pause(sb: S): { how: string; resume(): void } {
    const h = sb.rec.init;
    if (!h || !isAlive(h)) return { how: 'not running (sandbox stopped)', resume: () => {} };
    if (sb.cgroup?.freeze(true))
      return { how: 'frozen (cgroup freezer)', resume: () => sb.cgroup?.freeze(false) };
    const pids = pidsInNamespace(h.pid);
    for (const pid of pids) signal(pid, 'SIGSTOP');
    return {
      how: `paused (SIGSTOP, ${pids.length} processes)`,
      resume: () => {
        for (const pid of pids) signal(pid, 'SIGCONT');
      },
    };
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {}
}

function pidsInNamespace(initPid: number): number[] {
  let target: string;
  try {
    target = readlinkSyncSafe(`/proc/${initPid}/ns/pid`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    if (readlinkSyncSafe(`/proc/${e}/ns/pid`) === target) out.push(Number(e));
  }
  return out;
}

function readlinkSyncSafe(p: string): string {
  try {
    return readlinkSync(p);
  } catch {
    return '';
  }
}
