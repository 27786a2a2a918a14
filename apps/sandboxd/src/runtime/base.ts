/**
 * The read-only base image every sandbox overlays.
 *
 * Default base: a small synthetic tree (own /etc, /home/sandbox, /tmp, ...) plus the host's /usr (and any
 * of /bin, /sbin, /lib* that are real directories) and its dpkg database (/var/lib/dpkg) overlaid, each with
 * its own upper directory in the sandbox's writable layer. With the host's apt and dpkg configuration in /etc,
 * the sandbox root can install system packages into its own layer (root mode, see namespaces.ts). Nothing else of the host is visible:
 * no /root, /home, /etc/shadow, /work, data directories. With SANDBOXD_ROOTFS, the directory rootfs is the
 * lower layer instead, under a thin layer that adds the sandbox user and network files.
 *
 * Invariants:
 * - A built base directory is never modified (overlay lower layers must not change while mounted); a
 *   different content produces a new directory named by its hash.
 * - Root mode: the base belongs to host root, like the host's /usr; no sandbox maps host root, and through
 *   the idmapped lower layers each sandbox sees both as its own root's (namespaces.ts). Writes land in the
 *   sandbox's writable layer, owned by its own ids (its "/" and home live there).
 * - Nothing secret of the host /etc is copied: private key directories and every entry that is not
 *   world-readable are left out, on any distribution (security.host.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { ID_RANGE } from '../config.ts';
import { HOST_ENV, type HostTools } from './host-tools.ts';

export const SANDBOX_UID = 1000;
export const SANDBOX_HOME = '/home/sandbox';
/** Where every sandbox sees the runtime layers directory (runtime/layer.ts); the base has the mount point. */
export const LAYER_MOUNT = '/opt/paddock';

export interface IdMap {
  /** host uid/gid that is root (0) inside the sandbox user namespace */
  rootHostId: number;
  /** host uid/gid of the sandbox user (1000 inside) */
  userHostId: number;
  /** rootless: the service user's own gid, the group of every file (the ids above are its uid) */
  hostGid?: number;
}

/** The ids of sandbox `slot` (null: the base's own range), from SANDBOXD_ID_BASE; rootless, the service user. */
export function sandboxIds(
  idBase: number,
  slot: number | null,
  rootless: { uid: number; gid: number } | null,
): IdMap {
  if (rootless) return { rootHostId: rootless.uid, userHostId: rootless.uid, hostGid: rootless.gid };
  const root = idBase + ID_RANGE * (slot === null ? 0 : slot + 1);
  return { rootHostId: root, userHostId: root + SANDBOX_UID };
}

export interface BaseImage {
  /** overlay lowerdir value for "/" (absolute paths, ':'-separated) */
  lower: string;
  /** host directories overlaid separately (each gets its own upper dir in the writable layer) */
  hostDirs: string[];
  /** path inside the sandbox of the system CA bundle, when the base has one */
  caBundle: string | null;
}

const CA_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt'];

function caBundleOf(etcRoot: string): string | null {
  return CA_BUNDLES.find((f) => existsSync(path.join(etcRoot, f))) ?? null;
}

const HOST_TOP_DIRS = ['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];
/**
 * Host directories below the top that belong with /usr: dpkg's database describes exactly the files of the
 * host's /usr, so it is overlaid with it (not copied: 30 MB and thousands of files on every base).
 */
const HOST_SYSTEM_DIRS = ['var/lib/dpkg'];

/** Non-secret host /etc entries copied into the synthetic /etc when present. */
const HOST_ETC_COPY = [
  'alternatives',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'pki',
  'crypto-policies',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'protocols',
  'services',
  'shells',
  'inputrc',
  'bash.bashrc',
  'profile',
  'mime.types',
  'os-release',
  'debian_version',
  'login.defs',
  'magic',
  'magic.mime',
  'skel',
  // apt and dpkg: sources, keys, configuration (auth.conf.d and other credentials are mode 600: dropped)
  'apt',
  'dpkg',
  'debconf.conf',
];

/** Directories apt, dpkg and debconf write to, created in the default base. */
const PACKAGE_STATE_DIRS = [
  'var/lib/apt/lists/partial',
  'var/cache/apt/archives/partial',
  'var/cache/debconf',
  'var/log/apt',
];

/**
 * apt configuration added to a base that has /etc/apt: downloads run as root, since the sandbox user
 * namespace maps no `_apt` user; proxies come from the exec environment (http_proxy, https_proxy).
 */
const APT_CONF = 'APT::Sandbox::User "root";\n';

const ETC_FILES: Record<string, string> = {
  passwd: [
    'root:x:0:0:root:/root:/bin/bash',
    `sandbox:x:${SANDBOX_UID}:${SANDBOX_UID}:sandbox:${SANDBOX_HOME}:/bin/bash`,
    'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
    '',
  ].join('\n'),
  group: ['root:x:0:', `sandbox:x:${SANDBOX_UID}:`, 'nogroup:x:65534:', ''].join('\n'),
  hosts: '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n',
  hostname: 'sandbox\n',
  'resolv.conf':
    '# There is no DNS inside the sandbox: egress goes through the proxy in HTTP(S)_PROXY / ALL_PROXY,\n' +
    '# which resolves host names itself.\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n',
  'nsswitch.conf': [
    'passwd: files',
    'group: files',
    'shadow: files',
    'hosts: files dns',
    'networks: files',
    'protocols: files',
    'services: files',
    'ethers: files',
    'rpc: files',
    '',
  ].join('\n'),
  gitconfig: '[safe]\n\tdirectory = *\n[init]\n\tdefaultBranch = main\n',
};

function sh(cmd: string, args: string[]): void {
  execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...HOST_ENV } });
}

/**
 * Removes from a copied /etc tree what may be secret: directories named `private` (Debian's ssl/private,
 * RHEL's pki/tls/private), and any file or directory that is not world-readable on the host (key files
 * and key directories are mode 600/700 everywhere). Symlinks stay (they carry no content of their own).
 */
export function dropSecrets(dir: string): void {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const e of entries) {
    const p = path.join(dir, e);
    const st = lstatSync(p);
    if (st.isSymbolicLink()) continue;
    const worldReadable = (st.mode & 0o004) !== 0 && (!st.isDirectory() || (st.mode & 0o001) !== 0);
    if (!worldReadable || (st.isDirectory() && e === 'private')) {
      rmSync(p, { recursive: true, force: true });
      continue;
    }
    if (st.isDirectory()) dropSecrets(p);
  }
}

function hostDirLayout(): { dirs: string[]; links: Map<string, string> } {
  const dirs: string[] = [];
  const links = new Map<string, string>();
  for (const d of HOST_TOP_DIRS) {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(`/${d}`);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) links.set(d, readlinkSync(`/${d}`));
    else if (st.isDirectory()) dirs.push(d);
  }
  for (const d of HOST_SYSTEM_DIRS) {
    try {
      if (lstatSync(`/${d}`).isDirectory()) dirs.push(d);
    } catch {}
  }
  return { dirs, links };
}

/**
 * The host's system accounts (ids 1–999) as lines for the base's passwd or group, after its own entries:
 * dpkg resolves the users and groups its database names (statoverride, package files), so a base without
 * them cannot install packages. Only the name, id and (passwd) home and shell are kept: no password field,
 * no comment, no group members (they may name the host's people); human accounts (≥ 1000) stay out.
 */
export function systemAccounts(text: string, kind: 'passwd' | 'group', taken: Set<string>): string {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(':');
    const id = Number(f[2]);
    const name = f[0] ?? '';
    if (!/^[a-z_][a-z0-9_.-]*$/.test(name) || !Number.isInteger(id) || id < 1 || id > 999 || taken.has(name))
      continue;
    taken.add(name);
    if (kind === 'group') out.push(`${name}:x:${id}:`);
    else {
      const gid = Number(f[3]);
      if (!Number.isInteger(gid)) continue;
      out.push(`${name}:x:${id}:${gid}::${f[5] ?? '/nonexistent'}:${f[6] ?? '/usr/sbin/nologin'}`);
    }
  }
  return out.map((l) => `${l}\n`).join('');
}

function appendUser(rootfs: string, file: string, line: string, name: string): string {
  let text = '';
  try {
    text = readFileSync(path.join(rootfs, 'etc', file), 'utf8');
  } catch {}
  if (text.split('\n').some((l) => l.startsWith(`${name}:`))) return text;
  return `${text}${text.endsWith('\n') || text === '' ? '' : '\n'}${line}\n`;
}

/**
 * Builds (once) and returns the base image for the given options. `etc` is the host directory the
 * non-secret files are copied from (tests point it at a fake tree).
 */
export function ensureBase(
  dataDir: string,
  ids: IdMap,
  rootfs: string | undefined,
  tools: HostTools,
  etc = '/etc',
): BaseImage {
  const layout = rootfs ? { dirs: [], links: new Map<string, string>() } : hostDirLayout();
  const spec = JSON.stringify({
    v: 6,
    ids,
    etc,
    rootfs: rootfs ?? null,
    dirs: layout.dirs,
    links: [...layout.links],
    ETC_FILES,
  });
  const hash = createHash('sha256').update(spec).digest('hex').slice(0, 16);
  const dir = path.join(dataDir, 'base', hash);
  // The rootfs is reached through a link next to the base, so overlay options (shown in mountinfo inside)
  // name it relative to the sandbox directory, without its host path.
  const lower = rootfs ? `${dir}:${dir}.rootfs` : dir;
  const image = () => ({ lower, hostDirs: layout.dirs, caBundle: caBundleOf(rootfs ?? dir) });
  if (existsSync(`${dir}.complete`)) return image();

  const tmp = `${dir}.tmp-${process.pid}`;
  mkdirSync(path.dirname(dir), { recursive: true });
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(path.join(tmp, 'etc'), { recursive: true });
  if (!rootfs) {
    for (const d of [
      'dev',
      'proc',
      'sys',
      'run',
      'mnt',
      'opt',
      LAYER_MOUNT.slice(1),
      'srv',
      'var/cache',
      'var/lib',
      'var/log',
      'usr/local',
      ...PACKAGE_STATE_DIRS,
    ]) {
      mkdirSync(path.join(tmp, d), { recursive: true });
    }
    for (const d of layout.dirs) mkdirSync(path.join(tmp, d), { recursive: true });
    for (const [name, target] of layout.links) symlinkSync(target, path.join(tmp, name));
    const present = HOST_ETC_COPY.filter((e) => existsSync(path.join(etc, e)));
    if (present.length > 0) {
      try {
        sh(tools.cp, ['-a', ...present.map((e) => path.join(etc, e)), path.join(tmp, 'etc')]);
      } catch {
        // Unreadable entries (e.g. /etc/ssl/private when not root) are skipped; cp copied the rest.
      }
    }
    // Private keys never enter a sandbox.
    dropSecrets(path.join(tmp, 'etc'));
    for (const [name, content] of Object.entries(ETC_FILES))
      writeFileSync(path.join(tmp, 'etc', name), content);
    for (const kind of ['passwd', 'group'] as const) {
      let host = '';
      try {
        host = readFileSync(path.join(etc, kind), 'utf8');
      } catch {}
      const own = ETC_FILES[kind]!;
      const taken = new Set(own.split('\n').map((l) => l.split(':')[0] ?? ''));
      writeFileSync(path.join(tmp, 'etc', kind), own + systemAccounts(host, kind, taken));
    }
    if (existsSync(path.join(tmp, 'etc', 'apt', 'apt.conf.d')))
      writeFileSync(path.join(tmp, 'etc', 'apt', 'apt.conf.d', '00paddock-sandbox'), APT_CONF);
  } else {
    // Only what the sandbox needs on top of the rootfs: its user and the network files.
    const files: Record<string, string> = {
      passwd: appendUser(
        rootfs,
        'passwd',
        `sandbox:x:${SANDBOX_UID}:${SANDBOX_UID}:sandbox:${SANDBOX_HOME}:/bin/bash`,
        'sandbox',
      ),
      group: appendUser(rootfs, 'group', `sandbox:x:${SANDBOX_UID}:`, 'sandbox'),
      hosts: ETC_FILES['hosts']!,
      hostname: ETC_FILES['hostname']!,
      'resolv.conf': ETC_FILES['resolv.conf']!,
    };
    if (!existsSync(path.join(rootfs, 'etc', 'gitconfig'))) files['gitconfig'] = ETC_FILES['gitconfig']!;
    for (const [name, content] of Object.entries(files)) writeFileSync(path.join(tmp, 'etc', name), content);
    for (const d of ['dev', 'proc', 'run', LAYER_MOUNT.slice(1)])
      mkdirSync(path.join(tmp, d), { recursive: true });
  }
  mkdirSync(path.join(tmp, 'root'), { recursive: true, mode: 0o700 });
  mkdirSync(path.join(tmp, 'tmp'), { recursive: true });
  mkdirSync(path.join(tmp, 'var', 'tmp'), { recursive: true });
  mkdirSync(path.join(tmp, SANDBOX_HOME), { recursive: true });
  sh(tools.chown, ['-hR', `${ids.rootHostId}:${ids.hostGid ?? ids.rootHostId}`, tmp]);
  sh(tools.chown, ['-h', `${ids.userHostId}:${ids.hostGid ?? ids.userHostId}`, path.join(tmp, SANDBOX_HOME)]);
  sh(tools.chmod, ['1777', path.join(tmp, 'tmp'), path.join(tmp, 'var', 'tmp')]);
  sh(tools.chmod, ['0755', tmp, path.join(tmp, SANDBOX_HOME)]);
  sh(tools.chmod, ['0700', path.join(tmp, 'root')]);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  if (rootfs) {
    rmSync(`${dir}.rootfs`, { force: true });
    symlinkSync(rootfs, `${dir}.rootfs`);
  }
  writeFileSync(`${dir}.complete`, spec);
  return image();
}

/** Device files bind-mounted over empty files of the sandbox's /dev tmpfs. */
export const DEV_NODES = ['null', 'zero', 'full', 'random', 'urandom', 'tty'];

/**
 * Builds (once) the template of a sandbox's /dev: empty files the host devices are bind-mounted on,
 * `pts` and `shm` mount points, and the usual symlinks. The init copies it into its /dev tmpfs with one
 * `cp -a` instead of a dozen mkdir/ln processes. Never mounted, never modified once complete.
 */
export function ensureDevTemplate(dataDir: string): string {
  const dir = path.join(dataDir, 'base', 'dev-v1');
  if (existsSync(`${dir}.complete`)) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  for (const n of DEV_NODES) {
    writeFileSync(path.join(tmp, n), '');
    chmodSync(path.join(tmp, n), 0o644);
  }
  mkdirSync(path.join(tmp, 'pts'));
  chmodSync(path.join(tmp, 'pts'), 0o755);
  mkdirSync(path.join(tmp, 'shm'));
  chmodSync(path.join(tmp, 'shm'), 0o1777);
  symlinkSync('pts/ptmx', path.join(tmp, 'ptmx'));
  symlinkSync('/proc/self/fd', path.join(tmp, 'fd'));
  symlinkSync('/proc/self/fd/0', path.join(tmp, 'stdin'));
  symlinkSync('/proc/self/fd/1', path.join(tmp, 'stdout'));
  symlinkSync('/proc/self/fd/2', path.join(tmp, 'stderr'));
  chmodSync(tmp, 0o755);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  writeFileSync(`${dir}.complete`, 'v1\n');
  return dir;
}
