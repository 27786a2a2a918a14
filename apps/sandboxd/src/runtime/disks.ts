/**
 * Per-sandbox disks. In root mode with a disk limit (SANDBOXD_DISK_MAX > 0), a sandbox's writable layer (its
 * overlay upper and work directories) lives on its own ext4 file system in a sparse image file,
 * `<sandbox>/disk.img`, loop-mounted on the host at `<sandbox>/disk`. Rootless, or with no limit, the layer is a
 * plain directory (`<sandbox>/layer`): no kernel mechanism bounds it without root (docs/sandboxd.md, "Disk").
 *
 * Invariants (proved by test/disk.test.ts and test/checkpoint-race.test.ts):
 * - A write beyond the image size fails with ENOSPC inside the sandbox; the host file system holds at most
 *   the image's allocated blocks (deleted files give theirs back through `discard`).
 * - A snapshot copies the image file while its file system is frozen (FIFREEZE): the copy is consistent, and
 *   sandboxd never resolves a path inside the sandbox's tree, so nothing the sandbox plants (symlinks swapped
 *   in mid-copy, nested namespaces that escape a process freeze) can make it read anything else.
 * - One image is only ever mounted through one loop device (one superblock): mount(8) reuses the loop device
 *   already attached to an image (a running sandbox's namespace keeps it after a host unmount), and should it
 *   refuse instead, that device is mounted explicitly.
 * - Mounted nodev,nosuid: the sandbox cannot create usable device nodes or setuid files on it.
 * - Every helper runs by the absolute path resolved once at start (runtime/host-tools.ts resolveDiskTools,
 *   through sandboxd's own PATH) with HOST_ENV; a missing one disables disk images with a logged reason.
 * - The sandbox sees none of these host paths: its overlay names the layer relative to the sandbox's state
 *   directory (`disk/layer/...`), and the host mount at `<sandbox>/disk` is not in its mount namespace after
 *   the root switch (security.host.test.ts, mountinfo test; disk.test.ts).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../log.ts';
import { type DiskTool, type DiskTools, HOST_ENV, resolveDiskTools } from './host-tools.ts';

const execFileP = promisify(execFile);

/** Host tools by absolute path (HostTools, resolved once) with HOST_ENV, never anything a caller sent. */
const TOOL_ENV = { ...HOST_ENV, LC_ALL: 'C' };

/** Mount options; noinit_itable: ext4 must not zero the lazily initialized inode tables (it would fill every image). */
const MOUNT_OPTS = 'discard,noinit_itable,nodev,nosuid';

export interface Disks {
  /** Whether new sandboxes get a disk image (root mode and a limit). */
  readonly enabled: boolean;
  /** Size of new images, bytes (0 when disabled). */
  readonly bytes: number;
  /** Mount point of the sandbox's image. */
  mountPoint(sandboxDir: string): string;
  /** Mounts the sandbox's image (idempotent), creating it first if missing; thaws a file system left frozen. */
  mount(sandboxDir: string): Promise<void>;
  /** Unmounts the sandbox's image if mounted. */
  unmount(sandboxDir: string): Promise<void>;
  /** A consistent copy of the sandbox's image at `dest` (the file system frozen meanwhile, when mounted). */
  snapshot(sandboxDir: string, dest: string): Promise<void>;
  /** Replaces the sandbox's image with a copy of `src` (unmounted first; the sandbox must be stopped). */
  replace(sandboxDir: string, src: string): Promise<void>;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function mountinfoEscape(p: string): string {
  return p.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}

function isMounted(dir: string): boolean {
  const want = mountinfoEscape(dir);
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .some((l) => l.split(' ')[4] === want);
  } catch {
    return false;
  }
}

/**
 * Detected once at start, like cgroups: disk images are used when sandboxd runs as root with a limit > 0 and a
 * probe (make the template image, loop-mount it read-only) works; otherwise the reason is logged and sandboxes
 * get directory layers (limits.disk_bytes null). The template image is made once per size and copied (sparse)
 * for each new sandbox: mkfs on the create path would cost more than a copy.
 */
export async function detectDisks(opts: {
  dataDir: string;
  bytes: number;
  rootless: boolean;
  /** sandboxd's PATH, where the helpers are looked up (SandboxdOptions.toolPath). */
  toolPath: string;
  log: Logger;
}): Promise<Disks> {
  let enabled = !opts.rootless && opts.bytes > 0;
  const found = enabled ? resolveDiskTools(opts.toolPath) : { missing: '' };
  if ('missing' in found && enabled) {
    enabled = false;
    opts.log.warn('disk limit not enforced: a helper for disk images is not installed', {
      missing: found.missing,
    });
  }
  const tools: DiskTools | null = 'missing' in found ? null : found;
  function run(tool: DiskTool, args: string[]): Promise<{ stdout: string }> {
    // Only reached when enabled, which requires every tool.
    if (!tools) return Promise.reject(new Error(`disk images disabled (${tool})`));
    return execFileP(tools[tool], args, { env: TOOL_ENV, timeout: 120_000 });
  }
  if (opts.rootless && opts.bytes > 0)
    opts.log.warn(
      'disk limit not enforced: a rootless sandboxd cannot mount disk images (docs/sandboxd.md, "Disk")',
    );
  const bytes = opts.bytes;
  const template = path.join(opts.dataDir, `disk-template-${bytes}.img`);
  let templateReady: Promise<void> | null = null;

  function ensureTemplate(): Promise<void> {
    templateReady ??= (async () => {
      if (existsSync(template)) return;
      const tmp = `${template}.tmp-${process.pid}`;
      rmSync(tmp, { force: true });
      await run('truncate', ['-s', String(bytes), tmp]);
      // -m 0: no blocks reserved for root (the sandbox's root is not host root anyway).
      await run('mkfs.ext4', [
        '-q',
        '-F',
        '-m',
        '0',
        '-E',
        'lazy_itable_init=1,lazy_journal_init=1,nodiscard',
        tmp,
      ]);
      renameSync(tmp, template);
    })();
    templateReady.catch(() => {
      templateReady = null;
    });
    return templateReady;
  }

  if (enabled) {
    const probe = path.join(opts.dataDir, `disk-probe-${process.pid}`);
    try {
      await ensureTemplate();
      mkdirSync(probe, { recursive: true });
      await run('mount', ['-o', 'loop,ro,noload', template, probe]);
      await run('umount', [probe]);
    } catch (err) {
      enabled = false;
      const why = ((err as { stderr?: string }).stderr || (err as Error).message).trim().slice(0, 300);
      opts.log.warn('disk limit not enforced: disk images cannot be mounted here (loop devices, ext4)', {
        why,
      });
    } finally {
      rmSync(probe, { recursive: true, force: true });
    }
  }

  const imageOf = (sandboxDir: string) => path.join(sandboxDir, 'disk.img');
  /** Mount points known not to be left frozen. */
  const thawed = new Set<string>();
  const mountPoint = (sandboxDir: string) => path.join(sandboxDir, 'disk');

  /** Loop devices attached to the image (a running sandbox's namespace keeps its device attached). */
  async function loopDevices(img: string): Promise<string[]> {
    const { stdout } = await run('losetup', ['-j', img]).catch(() => ({ stdout: '' }));
    return stdout
      .split('\n')
      .map((l) => l.split(':')[0] ?? '')
      .filter((d) => d.startsWith('/dev/loop'));
  }

  async function unmount(sandboxDir: string): Promise<void> {
    const mnt = mountPoint(sandboxDir);
    if (!isMounted(mnt)) return;
    await run('umount', [mnt]).catch(() => run('umount', ['-l', mnt]));
  }

  return {
    enabled,
    bytes: enabled ? bytes : 0,
    mountPoint,

    async mount(sandboxDir) {
      const img = imageOf(sandboxDir);
      const mnt = mountPoint(sandboxDir);
      if (isMounted(mnt)) {
        // A snapshot interrupted by a crash of an earlier sandboxd left the file system frozen (once per start:
        // this sandboxd never leaves one frozen).
        if (!thawed.has(mnt)) await run('fsfreeze', ['-u', mnt]).catch(() => {});
        thawed.add(mnt);
        return;
      }
      mkdirSync(mnt, { recursive: true });
      if (!existsSync(img)) {
        await ensureTemplate();
        const tmp = `${img}.tmp`;
        await run('cp', ['--sparse=always', '--', template, tmp]);
        renameSync(tmp, img);
      }
      // A loop device still attached to the image is reused (see the invariants), never a second one.
      await run('mount', ['-o', `loop,${MOUNT_OPTS}`, img, mnt]).catch(async (err: unknown) => {
        const [dev] = await loopDevices(img);
        if (!dev) throw err;
        await run('mount', ['-o', MOUNT_OPTS, dev, mnt]);
      });
      thawed.add(mnt);
      opts.log.debug('sandbox disk mounted', { dir: sandboxDir });
    },

    unmount,

    async snapshot(sandboxDir, dest) {
      const mnt = mountPoint(sandboxDir);
      const frozen = isMounted(mnt);
      if (frozen) await run('fsfreeze', ['-f', mnt]);
      try {
        await run('cp', ['--sparse=always', '--', imageOf(sandboxDir), dest]);
      } finally {
        if (frozen) await run('fsfreeze', ['-u', mnt]);
      }
    },

    async replace(sandboxDir, src) {
      await unmount(sandboxDir);
      const img = imageOf(sandboxDir);
      const tmp = `${img}.tmp`;
      await run('cp', ['--sparse=always', '--', src, tmp]);
      renameSync(tmp, img);
    },
  };
}
