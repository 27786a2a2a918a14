/**
 * A sandbox's storage: its host id slot, its writable layer's directories, and the disk image it lives on.
 *
 * Layout: <data>/tenants/<tenant>/sandboxes/<name>/layer/{root,usr,...} holds the writable layer (overlay
 * upper dirs) and work/ the overlay work dirs, or both are on the sandbox's own disk.img, mounted at disk/
 * (root mode with a disk limit, runtime/disks.ts).
 * Root mode: each sandbox has its own slot of host ids (runtime/base.ts sandboxIds), recorded in sandbox.json;
 * its writable layer belongs to them. A layer from elsewhere (a checkpoint of another sandbox, a data dir of an
 * earlier version) is given to the sandbox's ids before it is used (remapIds).
 *
 * Invariants:
 * - No two sandboxes hold one id slot: a destroyed sandbox holds its slot until nothing of it is left
 *   (holdSlot, releaseSlot).
 * - Host-side work on a layer never follows a link the sandbox planted: directories are opened one component
 *   at a time and chowned by fd, trees walked by directory fd (runtime/nofollow.ts). Tests:
 *   test/security.planted-links.test.ts, test/checkpoint.test.ts (a restore into another sandbox),
 *   test/disk.test.ts.
 */
import { fchownSync, lstatSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { ID_RANGE, ID_SLOTS } from './config.ts';
import { AppError } from './errors.ts';
import type { Logger } from './log.ts';
import { type IdMap, SANDBOX_HOME } from './runtime/base.ts';
import type { Disks } from './runtime/disks.ts';
import { chownTree, closeFd, ensureDirAt, openOwnDir } from './runtime/nofollow.ts';

/** What storage uses of a sandbox (the Sandbox of sandboxes.service.ts). */
export interface StoredSandbox {
  readonly rec: { name: string; disk?: 'image'; slot?: number };
  readonly dir: string;
  /** the writable layer: on the mounted disk image, or in the sandbox dir */
  readonly layer: string;
  /** the overlay work dirs, beside the layer */
  readonly work: string;
}

export interface StorageDeps {
  log: Logger;
  rootless: boolean;
  disks: Disks;
  /** sandboxd's own top-level directories of the layer (runtime/base.ts) */
  hostDirs: string[];
  /** the host ids of a sandbox slot (runtime/base.ts sandboxIds) */
  idsFor(slot: number): IdMap;
  /** the slots of the sandboxes sandboxd has (not those being destroyed: they are held here) */
  slotsHeld(): Iterable<number>;
}

export function createStorage(deps: StorageDeps) {
  const { log } = deps;
  /** Slots of destroyed sandboxes not yet gone. */
  const destroying = new Set<number>();

  /** The sandbox's host ids; a record without a slot (earlier version) gets one here. */
  function idsOf(sb: StoredSandbox): IdMap {
    if (sb.rec.slot === undefined) sb.rec.slot = freeSlot();
    return deps.idsFor(sb.rec.slot);
  }

  /** The lowest id slot no sandbox holds (destroyed sandboxes hold theirs until they are gone). */
  function freeSlot(): number {
    const used = new Set<number>();
    for (const slot of deps.slotsHeld()) used.add(slot);
    for (const slot of destroying) used.add(slot);
    for (let slot = 0; slot < ID_SLOTS; slot++) if (!used.has(slot)) return slot;
    throw new AppError(
      'sandbox_unavailable',
      `no free host id range: at most ${ID_SLOTS} sandboxes per sandboxd`,
    );
  }

  /**
   * Creates the writable layer's directories (idempotent; under the sandbox lock). The upper dirs of "/" and
   * of the sandbox user's home give them their owners inside (the base belongs to ids no sandbox maps).
   * Below the upper dir of "/", everything is the sandbox's (a running one's, during a checkpoint): /home and
   * /home/sandbox are opened and made one component at a time without following a link (runtime/nofollow.ts),
   * and one the sandbox replaced with anything but a directory (a link, a file, a whiteout) is left as it is:
   * the sandbox sees what it made of it, the host nothing (docs/sandboxd.md, "Host-side operations on sandbox
   * files").
   */
  async function layerDirs(sb: StoredSandbox): Promise<void> {
    const ids = idsOf(sb);
    const root = path.join(sb.layer, 'root');
    let fresh = false;
    try {
      lstatSync(root);
    } catch {
      fresh = true;
    }
    if (!fresh) await remapIds(root, ids);
    // sandboxd's own directories (no sandbox reaches them): the layer's and the work dir's top levels.
    for (const d of ['root', ...deps.hostDirs]) {
      mkdirSync(path.join(sb.layer, d), { recursive: true });
      mkdirSync(path.join(sb.work, d), { recursive: true });
    }
    mkdirSync(path.join(sb.dir, 'merged'), { recursive: true });
    const gid = (id: number) => ids.hostGid ?? id;
    const [homeName, userName] = SANDBOX_HOME.slice(1).split('/') as [string, string];
    const opened: (number | null)[] = [];
    try {
      const rootFd = openOwnDir(root);
      opened.push(rootFd);
      fchownSync(rootFd, ids.rootHostId, gid(ids.rootHostId));
      // An overlay's root directory takes its owner from the upper directory: the sandbox root's, so it can
      // add to /usr and /var/lib/dpkg themselves (not only to the directories below them).
      for (const d of deps.hostDirs) {
        const fd = openOwnDir(path.join(sb.layer, d));
        opened.push(fd);
        fchownSync(fd, ids.rootHostId, gid(ids.rootHostId));
      }
      const homeFd = ensureDirAt(rootFd, homeName, 0o755);
      opened.push(homeFd);
      const userFd = homeFd === null ? null : ensureDirAt(homeFd, userName, 0o755);
      opened.push(userFd);
      if (homeFd !== null) fchownSync(homeFd, ids.rootHostId, gid(ids.rootHostId));
      if (userFd !== null) fchownSync(userFd, ids.userHostId, gid(ids.userHostId));
      else
        log.info('the sandbox replaced its home directory with something else; left as it is', {
          sandbox: sb.rec.name,
          path: homeFd === null ? path.posix.dirname(SANDBOX_HOME) : SANDBOX_HOME,
        });
    } finally {
      for (const fd of opened) closeFd(fd);
    }
  }

  /**
   * Gives a layer tree (whose "/" upper dir tells the ids it was made with) to `to`: every file owned by an
   * id of the old slot's range (its root, its user, the system users packages chown to) moves to the same id
   * of the new range. No-op when they match (rootless: always). Meant for a quiet tree (sandbox stopped or
   * not mounted), and safe on any: the walk never follows a link (runtime/nofollow.ts chownTree).
   */
  async function remapIds(rootDir: string, to: IdMap): Promise<void> {
    const st = lstatSync(rootDir);
    const from = { uid: st.uid, gid: st.gid };
    if (from.uid === to.rootHostId && from.gid === (to.hostGid ?? to.rootHostId)) return;
    if (deps.rootless) return;
    const shift = (id: number, base: number, target: number) =>
      id >= base && id < base + ID_RANGE ? target + (id - base) : id;
    await chownTree(path.dirname(rootDir), (uid, gid) => ({
      uid: shift(uid, from.uid, to.rootHostId),
      gid: shift(gid, from.gid, to.rootHostId),
    }));
  }

  /** Mounts the sandbox's disk image, if it has one, and creates the layer's directories (under the lock). */
  async function prepareStorage(sb: StoredSandbox): Promise<void> {
    if (sb.rec.disk === 'image') await deps.disks.mount(sb.dir);
    await layerDirs(sb);
  }

  return {
    idsOf,
    freeSlot,
    /** A destroyed sandbox's slot stays taken until nothing of it is left (releaseSlot). */
    holdSlot(slot: number): void {
      destroying.add(slot);
    },
    releaseSlot(slot: number): void {
      destroying.delete(slot);
    },
    remapIds,
    prepareStorage,
  };
}
