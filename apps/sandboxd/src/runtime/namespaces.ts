/**
 * Namespaces of one sandbox, held by a long-lived init process.
 *
 * Invariants (proved by test/isolation.test.ts):
 * - Root mode: the mount, pid, net, uts, ipc and cgroup namespaces are created by host root, so every mount
 *   in them (overlay root, /dev, /proc) belongs to the host user namespace and cannot be changed from inside.
 *   Sandbox processes additionally live in their own user namespace (held by the "holder" process, created
 *   by the sandbox's own unprivileged host uid, which so owns it and is charged for it) where uids 0–65535
 *   map to that sandbox's own host id range (IdMap: 0 its root, 1000 its user; no two sandboxes share an id);
 *   host root is unmapped there, so
 *   setuid-root binaries of the base do not elevate and host-owned files grant only their "other" bits.
 * - Root mode, writable system directories: the lower layers (the base, the host's /usr, /var/lib/dpkg, a
 *   rootfs) are idmapped mounts (IDMAP_PL), so files of host root appear as the sandbox root's and it can
 *   change its own copy of them (copy-up into its writable layer, owned by its own host ids); the host's files
 *   and other sandboxes never change (packages.test.ts). The host's layers map host root alone: other host
 *   users' files stay unmapped, unreadable beyond their "other" bits (security.mounts.test.ts). Every overlay is
 *   mounted nosuid, so a setuid file of the sandbox root never elevates the sandbox user.
 * - Rootless mode: unshare maps the sandboxd user to root of a first user namespace that owns the other
 *   namespaces; sandbox processes run as uid 1000 of a nested user namespace without capabilities, root execs
 *   as uid 0 of a sibling nested user namespace (the service user again, without capabilities outside it).
 * - Execs run nothing of the sandbox's filesystem with privileges: they enter the namespaces with the host's
 *   nsenter (absolute path, from the host mount namespace; rootless, both stages), and the first program run
 *   inside is the sandbox's /bin/sh as the sandbox user (EXEC_LOADER), which applies the exec environment
 *   (security.host.test.ts, rootless.test.ts). The init itself runs host binaries (HOST_PATH) only before it
 *   switches roots, and switches only once the holders have run theirs (each sleeps in its own user namespace);
 *   after it, pid 1 runs shell builtins only, since the sandbox root may write every system directory of its
 *   own root (packages.test.ts).
 * - No host path inside: overlay options name their directories relative to the sandbox's state directory
 *   (the runtime layer too: an overlay, not a bind mount, whose mountinfo line would show its host path) and
 *   the cgroup namespace hides the cgroup path (security.host.test.ts, security.mounts.test.ts).
 * - The init mounts onto directories of the sandbox's own tree while / is still the host's: each mount point,
 *   and every directory above it, must be a directory, never a link the sandbox planted (init.sh refuses the
 *   start otherwise; security.mounts.test.ts).
 * - Killing the init (pid 1 of the sandbox pid namespace) kills every sandbox process; the mount
 *   namespace and its overlay go away with the last of them.
 * - The init is detached from sandboxd (own session), so a sandboxd restart does not stop sandboxes;
 *   it is found again from the pid and start time recorded on disk.
 */
import { spawn } from 'node:child_process';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import type net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { ID_RANGE } from '../config.ts';
import type { BaseImage, IdMap } from './base.ts';
import { DEV_NODES, LAYER_MOUNT, SANDBOX_UID } from './base.ts';
import { EXEC_LOADER, HOST_ENV, type HostTools } from './host-tools.ts';

export interface InitHandle {
  /** host pid of the sandbox's pid-namespace init */
  pid: number;
  /** host pid of the process holding the sandbox user namespace */
  holderPid: number;
  /** /proc/<pid>/stat start time, to detect pid reuse */
  startTime: string;
  /** rootless: host pid of the process holding the user namespace of root execs */
  rootHolderPid?: number;
  /** root mode: why the lower layers are not idmapped (system directories read-only for the sandbox root) */
  idmapOff?: string;
}

/** Whether two handles name the same init process (pid and start time: a reused pid is another process). */
export function sameInit(
  a: Pick<InitHandle, 'pid' | 'startTime'>,
  b: Pick<InitHandle, 'pid' | 'startTime'>,
): boolean {
  return a.pid === b.pid && a.startTime === b.startTime;
}

/** Who an exec runs as inside the sandbox. */
export type ExecUser = 'sandbox' | 'root';

export interface SandboxDirs {
  layer: string;
  work: string;
  merged: string;
  /** sandboxd's own files for this sandbox (the init's fstab files); not visible inside */
  state: string;
}

/** The init's fd on its private FIFO directory (init.sh; exec/procs.ts FifoPool). */
export const FIFO_FD = 9;

/**
 * Sizes of the sandbox's memory-backed mounts (docs/sandboxd.md, "Disk"): their pages are charged to the
 * sandbox's memory cgroup where there is one, and without one these sizes are what bounds them.
 */
export const SHM_BYTES = 64 * 1024 * 1024;
export const RUN_BYTES = 16 * 1024 * 1024;

/**
 * The init's script, given in its environment (`sh -c 'eval "$SBX_INIT"'`; pid 1's environment is not
 * readable inside), so pid 1's command line holds no host path and pid 1 never has to exec anything after
 * the switch of roots (init.sh).
 */
const INIT_SCRIPT = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'init.sh'), 'utf8');

/**
 * unshare(2)'s number, for the idmap namespace IDMAP_PL makes (it differs between architectures; the mount
 * syscalls it uses do not). null: no idmapped host layers on this architecture (system directories stay
 * read-only for the sandbox root).
 */
const UNSHARE_NR: number | null =
  (
    {
      x64: 272,
      ia32: 310,
      arm: 337,
      arm64: 97,
      riscv64: 97,
      loong64: 97,
      ppc64: 282,
      s390x: 303,
    } as Record<string, number>
  )[process.arch] ?? null;

/**
 * Makes idmapped mounts (Linux 5.12; overlayfs over them, 5.19) with perl's syscall(): for each
 * source/target/kind triple of the NUL-separated table, a clone of the source tree (open_tree) whose ids are
 * shown through a user namespace (mount_setattr MOUNT_ATTR_IDMAP), attached at the target (move_mount).
 * util-linux before 2.39 has no option for it and node no syscall interface; perl is part of every Debian
 * system (perl-base) and of most others. The mount syscalls' numbers are the same on every architecture
 * (≥ 424).
 *
 * Which namespace (kind): `host` (the base, the host's /usr and /var/lib/dpkg) through a namespace of its own
 * that maps host id 0 alone, to the sandbox root's host id (ARGV[1]): host root's files appear as the sandbox
 * root's, every other host user's and group's as unmapped (nobody), so the sandbox root reads them only
 * through their "other" bits (CAP_DAC_OVERRIDE needs the file's uid and gid mapped) and cannot change them.
 * `full` (a SANDBOXD_ROOTFS tree, whose ids are the image's own) through the sandbox user namespace
 * (ARGV[0]): its ids 0–65535 are the sandbox's. The host namespace is made by a forked child that unshares
 * and waits until its maps are written and its namespace is open here; the mounts keep it alive.
 */
export const IDMAP_PL = `use strict;
my ($ns, $owner, $tab) = @ARGV;
open(my $full, '<', $ns) or die "open $ns: $!\\n";
open(my $t, '<', $tab) or die "open $tab: $!\\n";
my @f = do { local $/; split /\\0/, <$t> };
my $host;
if (grep { $_ eq 'host' } @f[grep { $_ % 3 == 2 } 0 .. $#f]) {
  my $nr = ${UNSHARE_NR ?? -1};
  die "no unshare(2) number known for this architecture\\n" if $nr < 0;
  pipe(my $up, my $upw) or die "pipe: $!\\n";
  pipe(my $go, my $gow) or die "pipe: $!\\n";
  my $pid = fork() // die "fork: $!\\n";
  if ($pid == 0) {
    close $up; close $gow;
    syscall($nr, 0x10000000) == 0 or do { print STDERR "unshare: $!\\n"; exit 1 };
    syswrite($upw, readlink('/proc/self'));
    sysread($go, my $x, 1);
    exit 0;
  }
  close $upw; close $go;
  # Its host pid (/proc is still the host's; fork answers the pid of the sandbox's pid namespace).
  sysread($up, my $hp, 32) > 0 or die "the idmap namespace could not be made\\n";
  for my $m ('uid_map', 'gid_map') {
    open(my $fh, '>', "/proc/$hp/$m") or die "open $m: $!\\n";
    print $fh "0 $owner 1\\n";
    close($fh) or die "write $m: $!\\n";
  }
  open($host, '<', "/proc/$hp/ns/user") or die "open the idmap namespace: $!\\n";
  close $gow;
  waitpid($pid, 0);
}
while (@f) {
  my ($src, $dst, $kind) = splice(@f, 0, 3);
  my ($e1, $e2) = ('', '');
  my $fd = syscall(428, -100, $src, 1 | 0x80000);
  die "open_tree $src: $!\\n" if $fd < 0;
  my $attr = pack('QQQQ', 0x100000, 0, 0, fileno($kind eq 'host' ? $host : $full));
  syscall(442, $fd, $e1, 0x1000, $attr, 32) == 0 or die "mount_setattr $src: $!\\n";
  syscall(429, $fd, $e2, -100, $dst, 4) == 0 or die "move_mount $dst: $!\\n";
}
`;

/**
 * The proxy listen helper, run inside a sandbox's network namespace only (host mount namespace, spawned
 * through nsenter --net). It opens the sandbox's proxy listener on 127.0.0.1 and hands the listening socket
 * to sandboxd over the IPC channel node opened for it, then exits: sandboxd accepts the sandbox's proxy
 * connections itself. Every exec of a starting sandbox waits for it, so it is perl when the host has it
 * (this one, 10-15 ms here) and sandboxd's own node otherwise (LISTEN_HELPER_JS, 100-250 ms).
 *
 * The perl helper speaks node's IPC channel (NODE_CHANNEL_FD, serialization "json"): one JSON line
 * {"cmd":"NODE_HANDLE","type":"net.Server",...} sent with the socket as SCM_RIGHTS ancillary data, as
 * node's own process.send(msg, server) does; node adopts it as a net.Server and emits 'message'. sendmsg
 * through syscall() (core perl has no sendmsg): the structures are those of 64-bit Linux, the syscall number
 * is given as $ARGV[0] (it differs between architectures).
 */
const LISTEN_HELPER_PL = `use strict;
my $nr = 0 + $ARGV[0];
my $port = 0 + ($ENV{SBX_PROXY_PORT} // 3128);
my $ipc = 0 + $ENV{NODE_CHANNEL_FD};
socket(my $s, 2, 1, 0) or die "socket: $!\\n";
setsockopt($s, 1, 2, pack('i', 1)) or die "setsockopt: $!\\n";
bind($s, pack('S n C4 x8', 2, $port, 127, 0, 0, 1)) or die "listen failed: bind: $!\\n";
listen($s, 511) or die "listen failed: $!\\n";
my $msg = qq({"cmd":"NODE_HANDLE","type":"net.Server","msg":"server"}\\n);
my $iov = pack('p Q', $msg, length $msg);
my $ctl = pack('Q i i i x4', 20, 1, 1, fileno($s));
my $hdr = pack('Q L x4 p Q p Q i x4', 0, 0, $iov, 1, $ctl, length $ctl, 0);
syscall($nr, $ipc, $hdr, 0) == length $msg or die "sendmsg: $!\\n";
`;

/** sendmsg's number, for the 64-bit architectures the perl helper's structures fit; null: use node. */
const SENDMSG_NR: number | null = process.arch === 'x64' ? 46 : process.arch === 'arm64' ? 211 : null;

const LISTEN_HELPER_JS = `'use strict';
const net = require('node:net');
const server = net.createServer();
server.on('error', (err) => {
  process.stderr.write('listen failed: ' + err.message + '\\n');
  process.exit(1);
});
server.listen({ host: '127.0.0.1', port: Number(process.env.SBX_PROXY_PORT || '3128') }, () => {
  process.send('server', server, () => process.exit(0));
});
`;

/**
 * The listen helper's command (run with an IPC channel and SBX_PROXY_PORT): the perl one when `perl` is
 * given and the architecture is one its structures fit, node's otherwise.
 */
export function listenHelper(perl: string | null): string[] {
  return perl && SENDMSG_NR !== null
    ? [perl, '-e', LISTEN_HELPER_PL, String(SENDMSG_NR)]
    : [process.execPath, '-e', LISTEN_HELPER_JS];
}

/**
 * Checked once at sandboxd's start: the perl helper speaks the IPC form of the node running sandboxd (node's
 * own, not a public interface). It opens a listener on an ephemeral port of the host's loopback and hands
 * it over, which is then closed. `perl` when that worked; null (with the reason) when there is no perl, the
 * architecture is not one the helper fits, or the helper handed nothing over within 5 s: sandboxd then uses
 * the node helper, so a node whose IPC form changed costs start time, never a sandbox.
 */
export async function checkPerlListener(
  perl: string | null,
): Promise<{ perl: string | null; reason?: string }> {
  if (!perl) return { perl: null, reason: 'no perl on PATH' };
  if (SENDMSG_NR === null) return { perl: null, reason: `no perl helper for ${process.arch}` };
  try {
    (await receiveListener(listenHelper(perl), 0, 5_000)).close();
    return { perl };
  } catch (err) {
    return { perl: null, reason: (err as Error).message };
  }
}

/**
 * Runs listen helper `argv` (with an IPC channel and SBX_PROXY_PORT=`port`) and resolves with the listener it
 * hands over; rejects with the reason when it exits without one, cannot be spawned (EAGAIN under a host's
 * process limit) or hands nothing over within `timeoutMs`. Settled by the socket's arrival or by the
 * helper's 'close' (after its IPC channel is drained): its 'exit' can come before the message with the
 * socket on a loaded host. A socket that arrives after the wait was given up goes to `late` (default: closed):
 * one left open would stay bound in the sandbox, so that the next start of the same sandbox fails with
 * EADDRINUSE.
 */
export function receiveListener(
  argv: string[],
  port: number,
  timeoutMs: number,
  late: (server: net.Server) => void = (server) => server.close(),
): Promise<net.Server> {
  const child = spawn(argv[0]!, argv.slice(1), {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: { ...HOST_ENV, SBX_PROXY_PORT: String(port) },
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  child.stderr?.on('error', () => {}); // the child's 'close' reports the end
  let settled = false;
  return new Promise<net.Server>((resolve, reject) => {
    const fail = (message: string) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      reject(new Error(message));
    };
    const timer = setTimeout(() => {
      fail(`the proxy listen helper handed nothing over in ${timeoutMs / 1000} s`);
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('message', (_msg, handle) => {
      const server = handle as net.Server | undefined;
      if (!server || typeof server.close !== 'function') {
        fail('the proxy listen helper sent a message without a listener');
        return;
      }
      if (settled) {
        late(server);
        return;
      }
      settled = true;
      clearTimeout(timer);
      resolve(server);
    });
    child.on('close', (code) =>
      fail(`the proxy listen helper exited (${code}) without a listener: ${stderr.trim()}`),
    );
    child.on('error', (err) => fail(`the proxy listen helper could not be started: ${err.message}`));
  });
}

/** One fstab line; whitespace and backslashes are octal-escaped (libmount unescapes every field). */
function fstabLine(source: string, target: string, type: string, options: string): string {
  const esc = (f: string) => f.replace(/[\\\s]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
  return `${esc(source)} ${esc(target)} ${esc(type)} ${esc(options)} 0 0\n`;
}

/** Joins a process to the sandbox cgroup(s) before exec'ing the real command: `cgwrap N file... cmd...`. */
const CGWRAP = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n-1)); done; exec "$@"';

/** `argv` run by the host's sh after joining the given cgroup files (argv[0] must be an absolute path). */
export function cgroupWrap(sh: string, procsFiles: string[], argv: string[]): string[] {
  return [sh, '-c', CGWRAP, 'cgwrap', String(procsFiles.length), ...procsFiles, ...argv];
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

/** Whether the init still runs: the same process (pid and start time), not a zombie waiting to be reaped. */
export function isAlive(h: InitHandle): boolean {
  try {
    const stat = readFileSync(`/proc/${h.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] !== 'Z' && fields[0] !== 'X' && fields[19] === h.startTime;
  } catch {
    return false;
  }
}

/** A sandbox init found on the host: the `unshare` sandboxd spawned and the sandbox's pid 1 it forked. */
export interface FoundInit {
  /** pid and start time of each of its processes, the unshare first */
  procs: { pid: number; startTime: string }[];
  /** the sandbox's directory (its SBX_MERGED's parent) */
  sandboxDir: string;
}

/**
 * The running sandbox inits whose sandbox directory lies under `root`, found from the kernel (the
 * `… sandbox-init` command line and the SBX_MERGED its environment keeps), not from sandboxd's records:
 * a sandboxd killed between spawning an init and recording it leaves one no record names.
 */
export function initsUnder(root: string): FoundInit[] {
  const prefix = root.endsWith('/') ? root : `${root}/`;
  const procs = new Map<number, { ppid: number; startTime: string; sandboxDir: string }>();
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {}
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
      if (argv.at(-1) === '') argv.pop();
      if (argv.at(-1) !== 'sandbox-init' || argv.at(-2) !== 'eval "$SBX_INIT"') continue;
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' || fields[0] === 'X') continue;
      const merged = readFileSync(`/proc/${e}/environ`, 'utf8')
        .split('\0')
        .find((kv) => kv.startsWith('SBX_MERGED='))
        ?.slice('SBX_MERGED='.length);
      if (!merged?.startsWith(prefix)) continue;
      procs.set(Number(e), {
        ppid: Number(fields[1]),
        startTime: fields[19] ?? '',
        sandboxDir: path.dirname(merged),
      });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  const found: FoundInit[] = [];
  for (const [pid, p] of procs) {
    if (procs.has(p.ppid)) continue; // the sandbox's pid 1: listed with its unshare
    const group = [{ pid, startTime: p.startTime }];
    for (const [c, cp] of procs) if (cp.ppid === pid) group.push({ pid: c, startTime: cp.startTime });
    found.push({ procs: group, sandboxDir: p.sandboxDir });
  }
  return found;
}

/**
 * Whether the holder of the sandbox user namespace still runs (a child of the init). Rootless, the sandbox
 * user has the holder's host uid and can kill it; execs cannot enter the sandbox then.
 */
export function holderAlive(h: InitHandle): boolean {
  const alive = (pid: number) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return state !== 'Z' && Number(ppid) === h.pid;
    } catch {
      return false;
    }
  };
  return alive(h.holderPid) && (h.rootHolderPid === undefined || alive(h.rootHolderPid));
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

export interface NamespaceRuntimeOptions {
  base: BaseImage;
  /** see ensureDevTemplate */
  devTemplate: string;
  rootless: boolean;
  tools: HostTools;
  /** host directory of the runtime layers, mounted read-only at LAYER_MOUNT (layer.ts); null: none */
  layerSource?: string | null;
}

export class NamespaceRuntime {
  readonly opts: NamespaceRuntimeOptions;
  constructor(opts: NamespaceRuntimeOptions) {
    this.opts = opts;
  }

  /**
   * Starts the sandbox init; resolves once the filesystem, namespaces and user mapping are ready.
   * `onNet(pid)` is called as soon as the network namespace (held by init `pid`) has loopback up, while the
   * init is still mounting the filesystem: sandboxd opens the proxy listener in parallel.
   */
  async start(
    dirs: SandboxDirs,
    procsFiles: string[],
    ids: IdMap,
    onNet?: (pid: number) => void,
  ): Promise<InitHandle> {
    const { hostDirs } = this.opts.base;
    // Relative to the state directory (the init's working directory): mountinfo shows these strings.
    const rel = (p: string) => path.relative(dirs.state, p);
    const baseLowers = this.opts.base.lower.split(':');
    const { tools } = this.opts;
    mkdirSync(path.join(dirs.state, 'fifos'), { recursive: true, mode: 0o700 });
    const m = dirs.merged;
    // Rootless: the overlay is mounted in a user namespace, where trusted.* xattrs are refused; without
    // userxattr (Linux 5.11) removing or renaming a directory of the base fails with EIO.
    const ovl = `nosuid${this.opts.rootless ? ',userxattr' : ''}`;
    // Root mode: every lower layer is idmapped at idmap/<n> in the init's mount namespace (init.sh); the plain
    // fstab is the fallback when that fails (a kernel or file system without idmapped mounts, no perl).
    const idmapped = new Map<string, string>();
    // A SANDBOXD_ROOTFS tree (the base's second lower) carries the image's own ids: shown through the sandbox
    // user namespace; the base and the host's directories through the namespace of host root alone (IDMAP_PL).
    const fullIds = new Set(baseLowers.slice(1));
    if (!this.opts.rootless) {
      for (const src of [...baseLowers, ...hostDirs.map((d) => `/${d}`)]) {
        const target = path.join('idmap', String(idmapped.size));
        mkdirSync(path.join(dirs.state, target), { recursive: true });
        idmapped.set(src, target);
      }
    }
    const idmapTab = path.join(dirs.state, 'idmap.tab');
    writeFileSync(
      idmapTab,
      [...idmapped]
        .map(([src, target]) => `${src}\0${target}\0${fullIds.has(src) ? 'full' : 'host'}\0`)
        .join(''),
    );
    // Three mount(8) runs (init.sh): the root overlay (and the init's FIFO tmpfs, outside the sandbox root);
    // then, once init.sh has checked each of MOUNT_POINTS, everything mounted on a directory of the sandbox's
    // own tree; then the contents of the fresh /dev tmpfs. Relative to the state directory (the init's
    // working directory): mountinfo shows these strings.
    const rootFstab = (idmap: boolean) =>
      [
        fstabLine(
          'overlay',
          m,
          'overlay',
          `lowerdir=${baseLowers.map((l) => (idmap ? idmapped.get(l)! : rel(l))).join(':')},upperdir=${rel(dirs.layer)}/root,workdir=${rel(dirs.work)}/root,${ovl}`,
        ),
        fstabLine('paddock', path.join(dirs.state, 'fifos'), 'tmpfs', 'mode=700,size=4k,nr_inodes=4096'),
      ].join('');
    // The runtime layers (layer.ts), read-only: an overlay of the layers directory (reached through the link
    // `layers` of the state directory) and an empty directory (an overlay without an upper needs two lower
    // layers), not a bind mount, whose mountinfo line would show the directory's host path. A layer renamed
    // into place later appears here too, once looked up after it is there (execs put it on PATH when ready).
    const layerLowers = this.opts.layerSource ? ['layers', 'layers-empty'] : null;
    if (layerLowers) {
      mkdirSync(path.join(dirs.state, 'layers-empty'), { recursive: true });
      rmSync(path.join(dirs.state, 'layers'), { force: true });
      symlinkSync(path.resolve(this.opts.layerSource!), path.join(dirs.state, 'layers'));
    }
    const sysFstab = (idmap: boolean) =>
      [
        ...hostDirs.map((d) =>
          fstabLine(
            'overlay',
            `${m}/${d}`,
            'overlay',
            `lowerdir=${idmap ? idmapped.get(`/${d}`)! : `/${d}`},upperdir=${rel(dirs.layer)}/${d},workdir=${rel(dirs.work)}/${d},${ovl}`,
          ),
        ),
        fstabLine('tmpfs', `${m}/dev`, 'tmpfs', 'nosuid,mode=755,size=1m'),
        fstabLine('tmpfs', `${m}/run`, 'tmpfs', `nosuid,nodev,mode=755,size=${RUN_BYTES}`),
        fstabLine('proc', `${m}/proc`, 'proc', 'defaults'),
        ...(layerLowers
          ? [
              fstabLine(
                'overlay',
                `${m}${LAYER_MOUNT}`,
                'overlay',
                `lowerdir=${layerLowers.join(':')},ro,nodev,${ovl}`,
              ),
            ]
          : []),
      ].join('');
    // Where the second run mounts, relative to the sandbox root: init.sh refuses a start where one of them, or a
    // directory above it, is not a plain directory of the sandbox's tree.
    const mountPoints = [...hostDirs, 'dev', 'run', 'proc', ...(layerLowers ? [LAYER_MOUNT.slice(1)] : [])];
    const fstabs = {
      SBX_FSTAB_ROOT: rootFstab(idmapped.size > 0),
      SBX_FSTAB_ROOT_PLAIN: rootFstab(false),
      SBX_FSTAB_SYS: sysFstab(idmapped.size > 0),
      SBX_FSTAB_SYS_PLAIN: sysFstab(false),
      SBX_FSTAB_DEV: [
        ...DEV_NODES.map((n) => fstabLine(`/dev/${n}`, `${m}/dev/${n}`, 'none', 'bind')),
        fstabLine('devpts', `${m}/dev/pts`, 'devpts', 'newinstance,nosuid,noexec,ptmxmode=0666,mode=0620'),
        fstabLine('tmpfs', `${m}/dev/shm`, 'tmpfs', `nosuid,nodev,mode=1777,size=${SHM_BYTES}`),
      ].join(''),
    };
    const fstabFiles: Record<string, string> = {};
    for (const [name, text] of Object.entries(fstabs)) {
      const file = path.join(dirs.state, `mounts-${name.slice('SBX_FSTAB_'.length).toLowerCase()}.fstab`);
      writeFileSync(file, text);
      fstabFiles[name] = file;
    }
    const unshareArgs = [tools.unshare];
    if (this.opts.rootless) unshareArgs.push('--user', '--map-root-user');
    unshareArgs.push(
      '--mount',
      '--pid',
      '--fork',
      '--net',
      '--uts',
      '--ipc',
      '--cgroup',
      '--propagation',
      'private',
      '--kill-child',
    );
    unshareArgs.push(tools.sh, '-c', 'eval "$SBX_INIT"', 'sandbox-init');
    const argv = cgroupWrap(tools.sh, procsFiles, unshareArgs);
    const child = spawn(argv[0]!, argv.slice(1), {
      detached: true,
      cwd: dirs.state,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...HOST_ENV,
        SBX_INIT: INIT_SCRIPT,
        SBX_OWNER: String(ids.rootHostId),
        SBX_ID_RANGE: String(ID_RANGE),
        SBX_MERGED: m,
        ...fstabFiles,
        SBX_MOUNT_POINTS: mountPoints.join(' '),
        SBX_IDMAP_TAB: idmapTab,
        SBX_IDMAP_PL: IDMAP_PL,
        SBX_DEV_TEMPLATE: this.opts.devTemplate,
        SBX_ROOTLESS: this.opts.rootless ? '1' : '0',
      },
    });
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      if (err.length < 4096) err += d.toString();
    });
    // A read error ends the pipe like its close does: the child's 'close' reports the start's failure.
    child.stdout.on('error', () => {});
    child.stderr.on('error', () => {});
    let idmapOff: string | undefined;
    const pid = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`sandbox init timed out: ${err.trim()}`));
      }, 10_000);
      let netSeen = false;
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const net = /net (\d+)\n/.exec(out);
        if (net && !netSeen) {
          netSeen = true;
          onNet?.(Number(net[1]));
        }
        const off = /idmap off: (.*)\n/.exec(out);
        if (off) idmapOff = off[1]!.trim() || 'unknown reason';
        const ready = /ready (\d+)\n/.exec(out);
        if (ready) {
          clearTimeout(timer);
          resolve(Number(ready[1]));
        }
      });
      // 'close', not 'exit': once the output is read to its end, so the error carries all of it (a holder's
      // too). The init's end ends its pid namespace, and with it every process that holds the pipes.
      child.on('close', (code) => {
        clearTimeout(timer);
        reject(new Error(`sandbox init failed (exit ${code}): ${err.trim()}`));
      });
      // A spawn that fails (EAGAIN under a host's process limit): the start fails, sandboxd goes on.
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(new Error(`sandbox init could not be started: ${e.message}`));
      });
    });
    child.removeAllListeners('close');
    child.stdout.destroy();
    child.stderr.destroy();
    child.unref();
    const startTime = processStartTime(pid);
    if (startTime === null) throw new Error('sandbox init exited right after starting');
    // The holders sleep in their own user namespaces (with their id maps written) before the switch of roots
    // (init.sh await_holder), so they are there by "ready"; told apart by their maps.
    const initUserNs = safeReadlink(`/proc/${pid}/ns/user`);
    let holderPid = 0;
    let rootHolderPid = 0;
    for (const c of children(pid)) {
      const cmd = safeRead(`/proc/${c}/cmdline`);
      if (!cmd.startsWith('sleep\0infinity') || safeReadlink(`/proc/${c}/ns/user`) === initUserNs) continue;
      const inner = safeRead(`/proc/${c}/uid_map`).trim().split(/\s+/)[0];
      if (this.opts.rootless && inner === '0') rootHolderPid = c;
      else if (inner === String(this.opts.rootless ? SANDBOX_UID : 0)) holderPid = c;
    }
    if (holderPid === 0 || (this.opts.rootless && rootHolderPid === 0)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
      throw new Error('sandbox user namespace holder is gone');
    }
    return {
      pid,
      holderPid,
      startTime,
      ...(rootHolderPid ? { rootHolderPid } : {}),
      ...(idmapOff ? { idmapOff } : {}),
    };
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
   * argv that runs `cmd` inside the sandbox as the sandbox user (or its root: uid 0 of the sandbox user
   * namespace, rootless of the sibling namespace of root execs), in `dir` (resolved inside the sandbox root),
   * with the environment given to the host side by execEnv() (host-tools.ts). Host binaries only, by absolute
   * path, until the sandbox's own /bin/sh runs EXEC_LOADER as the sandbox user.
   *
   * Rootless, two stages: setns into the mount namespace needs CAP_SYS_ADMIN in the caller's own user
   * namespace, so the host nsenter first enters the user namespace that owns the sandbox's namespaces (and
   * nothing else: it stays in the host's pid and mount namespaces, out of the sandbox's sight), then execs
   * the host nsenter again, which enters the other namespaces and the sandbox user namespace, forks into the
   * pid namespace and runs the loader. Nothing is looked up through a PATH on the way.
   */
  execArgv(h: InitHandle, cmd: string[], dir: string, user: ExecUser = 'sandbox'): string[] {
    const { nsenter } = this.opts.tools;
    const inner = ['/bin/sh', '-c', EXEC_LOADER, 'sandbox-exec', dir, ...cmd];
    const ns = ['-t', String(h.pid), '-m', '-p', '-n', '-u', '-i', '-C', '-r'];
    if (this.opts.rootless) {
      return [
        nsenter,
        `--user=/proc/${h.pid}/ns/user`,
        '--preserve-credentials',
        '--',
        nsenter,
        ...ns,
        `--user=/proc/${user === 'root' ? h.rootHolderPid : h.holderPid}/ns/user`,
        '--preserve-credentials',
        '--',
        ...inner,
      ];
    }
    return [
      nsenter,
      `--user=/proc/${h.holderPid}/ns/user`,
      ...ns,
      '-S',
      String(user === 'root' ? 0 : SANDBOX_UID),
      '-G',
      String(user === 'root' ? 0 : SANDBOX_UID),
      '--',
      ...inner,
    ];
  }

  /** argv that runs the listen helper (listenHelper) inside the network namespace of init `pid` only. */
  listenHelperArgv(pid: number): string[] {
    const userns = this.opts.rootless ? [`--user=/proc/${pid}/ns/user`, '--preserve-credentials'] : [];
    const helper = listenHelper(this.opts.tools.perl);
    return [this.opts.tools.nsenter, ...userns, `--net=/proc/${pid}/ns/net`, '--', ...helper];
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
