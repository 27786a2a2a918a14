/**
 * Directory steps sandboxd takes on the host side (host root in the host mount namespace; rootless, the service
 * user) in a tree a sandbox controls: its writable layer's upper directories, which hold whatever the sandbox
 * root left there. Any entry may be a symlink (absolute, relative, dangling), a file, a whiteout, and a running
 * sandbox may swap it between two steps (docs/sandboxd.md, "Host-side operations on sandbox files").
 *
 * Invariants (test/security.planted-links.test.ts):
 * - No path below a trusted directory is resolved as a string. Each step opens one component relative to the
 *   directory fd of the step before (`/proc/self/fd/<fd>/<name>`: node has no openat), with O_NOFOLLOW and
 *   O_DIRECTORY, so a link or a non-directory at any component fails the open (ELOOP, ENOTDIR) instead of
 *   being followed; there is no check before the act for the sandbox to race.
 * - Owners change through the opened fd (fchown), or for an entry that is not a directory, by lchown of its
 *   name in its opened parent: what changes is always inside the tree.
 * - mkdir of a missing entry names it in its opened parent; mkdir never follows a final symlink (EEXIST).
 */
import { closeSync, constants, mkdirSync, openSync } from 'node:fs';
import fs from 'node:fs/promises';

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** Deeper trees are refused: the walk holds one fd per level, and a sandbox can nest directories at will. */
export const MAX_DEPTH = 2048;
/** Entries of one directory whose owners are changed at once (chownTree). */
const BATCH = 32;
/** What an open of an entry that is not a plain directory (or no longer there) fails with. */
const NOT_A_DIR = new Set(['ELOOP', 'ENOTDIR', 'ENOENT']);

/** The path of directory fd `fd` (and of entry `name` in it) through the process's fd table. */
export function fdPath(fd: number, name?: string): string {
  if (name === undefined) return `/proc/self/fd/${fd}`;
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0'))
    throw new Error(`not a single path component: ${JSON.stringify(name)}`);
  return `/proc/self/fd/${fd}/${name}`;
}

/**
 * Opens sandboxd's own directory `dir`: an absolute path no sandbox reaches (its state directory, the layer
 * directory that holds the upper directories). Its last component is not followed either.
 */
export function openOwnDir(dir: string): number {
  return openSync(dir, DIR_FLAGS);
}

/** Opens entry `name` of directory fd `dirFd` as a directory, or answers why not (ENOENT, ELOOP, ENOTDIR). */
function openAt(dirFd: number, name: string): number | string {
  try {
    return openSync(fdPath(dirFd, name), DIR_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (NOT_A_DIR.has(code)) return code;
    throw err;
  }
}

/** Opens directory `name` of directory fd `dirFd`; null when it is missing or not a directory (a link to one too). */
export function openDirAt(dirFd: number, name: string): number | null {
  const fd = openAt(dirFd, name);
  return typeof fd === 'number' ? fd : null;
}

/**
 * Directory `name` of directory fd `dirFd`, made with `mode` (and the umask) when missing. null when the entry
 * exists and is not a directory: it is left as it is.
 */
export function ensureDirAt(dirFd: number, name: string, mode: number): number | null {
  const fd = openAt(dirFd, name);
  if (typeof fd === 'number') return fd;
  if (fd !== 'ENOENT') return null;
  try {
    mkdirSync(fdPath(dirFd, name), { mode });
  } catch (err) {
    // Made meanwhile (by the sandbox, if it runs): whatever it is, it is opened without following below.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return openDirAt(dirFd, name);
}

export function closeFd(fd: number | null): void {
  if (fd !== null) closeSync(fd);
}

/**
 * Gives sandboxd's own directory `ownDir` and every entry of the tree below it the owners `owner` maps its
 * current ones to (unchanged entries are not touched; chown clears setuid/setgid bits, the mode is kept
 * otherwise). Never follows a link: directories are opened one component at a time and changed through their
 * fd, other entries (links included) by lchown of their name in the opened parent. An entry swapped meanwhile
 * is changed as what it is now, still inside the tree.
 */
export async function chownTree(
  ownDir: string,
  owner: (uid: number, gid: number) => { uid: number; gid: number },
): Promise<void> {
  /** lchown of entry `name` of the opened directory, by what it is now (not a directory, or swapped meanwhile). */
  const entry = async (dir: fs.FileHandle, name: string): Promise<void> => {
    const p = fdPath(dir.fd, name);
    const s = await fs.lstat(p).catch(() => null);
    if (!s) return; // gone meanwhile
    const o = owner(s.uid, s.gid);
    if (o.uid !== s.uid || o.gid !== s.gid) await fs.lchown(p, o.uid, o.gid);
  };
  const walk = async (dir: fs.FileHandle, depth: number): Promise<void> => {
    const st = await dir.stat();
    const to = owner(st.uid, st.gid);
    if (to.uid !== st.uid || to.gid !== st.gid) await dir.chown(to.uid, to.gid);
    const entries = await fs.readdir(fdPath(dir.fd), { withFileTypes: true });
    // Other entries a batch at a time (the thread pool runs their calls in parallel); directories one by one,
    // so that the walk holds one fd per level.
    const others = entries.filter((e) => !e.isDirectory()).map((e) => e.name);
    for (let i = 0; i < others.length; i += BATCH)
      await Promise.all(others.slice(i, i + BATCH).map((name) => entry(dir, name)));
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      if (depth >= MAX_DEPTH) throw new Error(`the tree nests deeper than ${MAX_DEPTH} directories`);
      const sub = await fs.open(fdPath(dir.fd, e.name), DIR_FLAGS).catch((err: NodeJS.ErrnoException) => {
        if (NOT_A_DIR.has(err.code ?? '')) return null;
        throw err;
      });
      if (!sub) {
        await entry(dir, e.name); // no longer a directory
        continue;
      }
      try {
        await walk(sub, depth + 1);
      } finally {
        await sub.close();
      }
    }
  };
  const top = await fs.open(ownDir, DIR_FLAGS);
  try {
    await walk(top, 0);
  } finally {
    await top.close();
  }
}
