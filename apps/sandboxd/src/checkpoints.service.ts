/**
 * Checkpoints of a sandbox's writable layer: create, list, restore, delete, retention.
 *
 * State on disk: <data>/tenants/<tenant>/checkpoints/<id>/checkpoint.json plus either disk.img (a copy of the
 * sandbox's disk image, runtime/disks.ts) or layer/ (a copy of a directory layer: rootless, no disk limit, or
 * a sandbox created before disk images). A checkpoint belongs to the token (tenant) and can be restored into
 * any of its sandboxes; each sandbox keeps at most `checkpointsMax` of its own, the oldest removed first.
 *
 * Invariants (issue 12, finding 4; proved by test/checkpoint-race.test.ts, root and rootless):
 * - A checkpoint never reads anything but the sandbox's own files, whatever runs inside:
 *   - disk image: the image file is copied while its file system is frozen (FIFREEZE); no path inside the
 *     sandbox is resolved, so no symlink can be followed;
 *   - directory layer: `cp -a` runs only while no sandbox process can run: frozen by the cgroup freezer
 *     (which holds every process in the sandbox's cgroup, nested pid namespaces included; the freeze is
 *     confirmed before the copy), or, without a freezer, after every process of the sandbox was ended
 *     (killing its pid-namespace init ends all namespaces below it); the sandbox is started again after the
 *     copy. SIGSTOP of the processes sandboxd can see is never used: it misses nested pid namespaces.
 * - Restore stops the sandbox first and copies only sandboxd's own checkpoint files (nothing there is
 *   reachable from any sandbox); root mode, the restored files are then given to the target sandbox's own
 *   host ids (adopt: a walk by directory fd that never follows a symlink, runtime/nofollow.ts), inside a disk
 *   image too (security.host.test.ts, checkpoint.test.ts, security.planted-links.test.ts).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { AppError } from './errors.ts';
import type { Logger } from './log.ts';
import type { SandboxCgroup } from './runtime/cgroups.ts';
import type { Disks } from './runtime/disks.ts';
import { HOST_ENV, type HostTools } from './runtime/host-tools.ts';
import { type InitHandle, isAlive } from './runtime/namespaces.ts';
import { removeTree, writeJsonAtomic } from './state-files.ts';

const execFileP = promisify(execFile);
const CHECKPOINT_RE = /^ckpt-[0-9a-f]{16}$/;

export interface NdjsonLine {
  type: 'info' | 'stdout' | 'stderr' | 'error';
  [k: string]: unknown;
}
export type Emit = (line: NdjsonLine) => void;

interface CheckpointMeta {
  id: string;
  create_time: string;
  source_sandbox: string;
}

/** What checkpoints use of a sandbox (the Sandbox of sandboxes.service.ts). */
export interface CheckpointedSandbox {
  readonly rec: { name: string; init: InitHandle | null; disk?: 'image' };
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
  tools: HostTools;
  disks: Disks;
  /** Checkpoints kept per source sandbox. */
  checkpointsMax: number;
  /** The tenant's sandbox; throws sandbox_not_found. */
  find(tenant: string, name: string): S;
  /** Mounts the sandbox's disk image if it has one and creates the layer's directories (under the lock). */
  prepareStorage(sb: S): Promise<void>;
  /**
   * Gives the sandbox's layer (in place, quiet: sandbox stopped) to the sandbox's own host ids: a checkpoint of
   * another sandbox carries that sandbox's ids (storage.ts remapIds; no-op rootless or when they match).
   */
  adopt(sb: S): Promise<void>;
  /** Writes the sandbox record. */
  persist(sb: S): void;
  /** Stops every process and session of the sandbox (under the sandbox lock). */
  stop(sb: S): Promise<void>;
  /** Starts the sandbox (under the sandbox lock). */
  start(sb: S): Promise<unknown>;
}

const now = () => new Date().toISOString();
const notFound = (id: string) =>
  new AppError('checkpoint_not_found', `checkpoint ${JSON.stringify(id)} not found`);

export function createCheckpointsService<S extends CheckpointedSandbox>(deps: CheckpointsDeps<S>) {
  const { tenantsDir, log, tools, disks, find, prepareStorage, adopt, persist, stop, start } = deps;
  const dirOf = (tenant: string, id: string) => path.join(tenantsDir, tenant, 'checkpoints', id);

  /** The tenant's checkpoints, oldest first. */
  function all(tenant: string): CheckpointMeta[] {
    const dir = path.join(tenantsDir, tenant, 'checkpoints');
    let ids: string[] = [];
    try {
      ids = readdirSync(dir).filter((d) => CHECKPOINT_RE.test(d));
    } catch {}
    const out: CheckpointMeta[] = [];
    for (const id of ids) {
      try {
        out.push(JSON.parse(readFileSync(path.join(dir, id, 'checkpoint.json'), 'utf8')) as CheckpointMeta);
      } catch {}
    }
    return out.sort(
      (a, b) => String(a.create_time).localeCompare(String(b.create_time)) || a.id.localeCompare(b.id),
    );
  }

  function read(tenant: string, id: string): CheckpointMeta {
    if (!CHECKPOINT_RE.test(id)) throw notFound(id);
    try {
      return JSON.parse(
        readFileSync(path.join(dirOf(tenant, id), 'checkpoint.json'), 'utf8'),
      ) as CheckpointMeta;
    } catch {
      throw notFound(id);
    }
  }

  /** Removes a checkpoint: renamed out of the listing first (atomic), then deleted. */
  async function remove(tenant: string, id: string): Promise<void> {
    const trash = path.join(
      tenantsDir,
      tenant,
      'checkpoints',
      `.trash-${id}-${randomBytes(4).toString('hex')}`,
    );
    try {
      await fs.rename(dirOf(tenant, id), trash);
    } catch {
      throw notFound(id);
    }
    await removeTree(trash, tools.chmod);
  }

  /** cgroup freeze, or ending every process; runs `copy` while nothing of the sandbox can run. */
  async function copyStopped(sb: S, emit: Emit, copy: () => Promise<unknown>): Promise<void> {
    const h = sb.rec.init;
    if (!h || !isAlive(h)) {
      emit({ type: 'info', data: 'Sandbox not running: nothing to freeze', time: now() });
      await copy();
      return;
    }
    if (sb.cgroup?.freeze(true)) {
      emit({ type: 'info', data: 'Processes frozen (cgroup freezer)', time: now() });
      try {
        await copy();
      } finally {
        sb.cgroup.freeze(false);
      }
      return;
    }
    sb.cgroup?.freeze(false); // a freeze that did not complete must not hold processes the stop kills
    emit({
      type: 'info',
      data: 'No cgroup freezer: every process of the sandbox is stopped for the copy; it is started again after',
      time: now(),
    });
    await stop(sb);
    try {
      await copy();
    } finally {
      await start(sb).catch((err: unknown) =>
        log.warn('cannot start the sandbox again after a checkpoint', { sandbox: sb.rec.name, err }),
      );
    }
  }

  return {
    list(tenant: string, name: string) {
      find(tenant, name);
      return { checkpoints: all(tenant) };
    },

    async create(tenant: string, name: string, emit: Emit): Promise<void> {
      const sb = find(tenant, name);
      await sb.locked(async () => {
        const id = `ckpt-${randomBytes(8).toString('hex')}`;
        const dir = dirOf(tenant, id);
        const t0 = performance.now();
        emit({ type: 'info', data: 'Creating checkpoint...', time: now() });
        try {
          await prepareStorage(sb); // a checkpoint taken before the background setup ran
          await fs.mkdir(dir, { recursive: true });
          if (sb.rec.disk === 'image') {
            emit({ type: 'info', data: 'File system frozen (disk image copied)', time: now() });
            await disks.snapshot(sb.dir, path.join(dir, 'disk.img'));
          } else {
            await copyStopped(sb, emit, () => copyTree(sb.layer, path.join(dir, 'layer')));
          }
        } catch (err) {
          await removeTree(dir, tools.chmod);
          throw err;
        }
        const meta: CheckpointMeta = { id, create_time: now(), source_sandbox: name };
        writeJsonAtomic(path.join(dir, 'checkpoint.json'), meta);
        const ms = Math.round(performance.now() - t0);
        log.info('checkpoint created', { sandbox: name, checkpoint: id, ms });
        // Retention: the oldest checkpoints of this sandbox beyond checkpointsMax go.
        const own = all(tenant).filter((c) => c.source_sandbox === name);
        for (const old of own.slice(0, Math.max(0, own.length - deps.checkpointsMax))) {
          await remove(tenant, old.id).catch(() => {});
          log.info('checkpoint removed (retention)', { sandbox: name, checkpoint: old.id });
          emit({
            type: 'info',
            data: `Checkpoint ${old.id} removed (at most ${deps.checkpointsMax} kept per sandbox)`,
            removed_checkpoint_id: old.id,
            time: now(),
          });
        }
        emit({ type: 'info', data: `Checkpoint ${id} created`, checkpoint_id: id, id, time: now() });
      });
    },

    /** Throws checkpoint_not_found before any streaming starts. */
    assertExists(tenant: string, id: string): void {
      read(tenant, id);
    },

    /**
     * Deletes a checkpoint of sandbox `name` (which may have been destroyed since): 404 for an unknown id or
     * one taken from another sandbox.
     */
    async delete(tenant: string, name: string, id: string): Promise<void> {
      if (read(tenant, id).source_sandbox !== name) throw notFound(id);
      await remove(tenant, id);
      log.info('checkpoint deleted', { sandbox: name, checkpoint: id });
    },

    async restore(tenant: string, name: string, id: string, emit: Emit): Promise<void> {
      const sb = find(tenant, name);
      const src = dirOf(tenant, id);
      await sb.locked(async () => {
        read(tenant, id);
        const image = existsSync(path.join(src, 'disk.img'));
        if (image && deps.rootless)
          throw new AppError(
            'checkpoint_incompatible',
            `checkpoint ${JSON.stringify(id)} is a disk image, which a rootless sandboxd cannot mount`,
          );
        const t0 = performance.now();
        emit({ type: 'info', data: `Restoring checkpoint ${id}...`, checkpoint_id: id, time: now() });
        await stop(sb);
        emit({ type: 'info', data: 'Sandbox processes stopped', time: now() });
        const trash = path.join(sb.dir, `trash-${randomBytes(4).toString('hex')}`);
        await fs.mkdir(trash);
        const discard = async (...names: string[]) => {
          for (const n of names) await fs.rename(path.join(sb.dir, n), path.join(trash, n)).catch(() => {});
        };
        if (image) {
          await disks.replace(sb.dir, path.join(src, 'disk.img'));
          if (sb.rec.disk !== 'image') {
            sb.rec.disk = 'image';
            persist(sb);
            await discard('layer', 'work');
          }
        } else if (disks.enabled || sb.rec.disk === 'image') {
          // A directory checkpoint (taken before disk images) restored onto a fresh image.
          await disks.unmount(sb.dir);
          await discard('disk.img', 'layer', 'work');
          sb.rec.disk = 'image';
          persist(sb);
          await disks.mount(sb.dir);
          await copyTree(path.join(src, 'layer'), sb.layer);
        } else {
          const staged = path.join(sb.dir, `layer.restore-${randomBytes(4).toString('hex')}`);
          await copyTree(path.join(src, 'layer'), staged);
          await discard('layer', 'work');
          await fs.rename(staged, sb.layer);
        }
        // A checkpoint of another sandbox carries that sandbox's host ids: the restored files (inside the
        // mounted image, or the directory layer) become this sandbox's before anything of it runs.
        if (sb.rec.disk === 'image') await disks.mount(sb.dir);
        await adopt(sb);
        void removeTree(trash, tools.chmod).catch((err: unknown) =>
          log.warn('cannot remove the replaced layer', { sandbox: name, err }),
        );
        await start(sb);
        log.info('checkpoint restored', {
          sandbox: name,
          checkpoint: id,
          ms: Math.round(performance.now() - t0),
        });
        emit({ type: 'info', data: `Checkpoint ${id} restored`, checkpoint_id: id, time: now() });
      });
    },
  };

  /**
   * cp -a of a directory layer (only ever of a stopped or frozen sandbox, or of a checkpoint). Rootless, in a
   * user namespace that maps sandboxd's uid to root: its CAP_DAC_OVERRIDE covers the layer's files (all owned
   * by that uid), so files and directories the sandbox made unreadable (chmod 000) are copied too.
   */
  function copyTree(src: string, dst: string): Promise<unknown> {
    const cp = [tools.cp, '-a', '--', src, dst];
    return deps.rootless
      ? execFileP(tools.unshare, ['--user', '--map-root-user', '--', ...cp], { env: HOST_ENV })
      : execFileP(cp[0]!, cp.slice(1), { env: HOST_ENV });
  }
}
