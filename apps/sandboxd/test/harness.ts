/**
 * Starts a throw-away sandboxd as a child process (crashes stay isolated from the test runner):
 * a free port on 127.0.0.1, a random token, a temp data dir. stop() kills the daemon, every sandbox
 * init of the data dir (recorded or not: leftovers.ts), detaches its disk images' loop devices and removes
 * the data dir (unless keepData is set).
 *
 * Used by this workspace's tests, packages/sandbox-client's conformance suite and scripts/bench-sandbox.ts.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostBin } from './host-bin.ts';
import { detachLoopDevicesUnder, killSandboxInitsUnder, sandboxInitsUnder } from './leftovers.ts';
import type { TestNet } from './netns.ts';
import { sharedLayerDir } from './runtime-layer-cache.ts';

const MAIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'main.ts');
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** How to spawn sandboxd (`spawn(command, args, { uid, gid })`); dispose() after it exited. */
export interface SandboxdLaunch {
  command: string;
  args: string[];
  /** ids for spawn() (undefined: no switch, or the command switches itself) */
  ids: { uid: number; gid: number } | undefined;
  dispose(): void;
}

/**
 * The command that runs `node main.ts` as `user` (the caller must be root), or as the caller itself.
 *
 * A checkout below a directory the user cannot traverse (a clone in /root, mode 700) is bind-mounted in a
 * private mount namespace of the daemon at a directory of ours the user can reach, and node and main.ts are
 * given by their paths in that mount (node too, by a file bind, when it lives out of the user's reach
 * outside the checkout). `prepare` (a shell script) runs in such a namespace too, first, with the privilege
 * to mount: a test changes what the daemon and its sandboxes see of the host (not root: in a user namespace
 * that maps the caller to itself, whose capabilities the daemon does not keep: it runs rootless). The daemon, its sandboxes and shims
 * all live in that namespace (they inherit it); the host's mount table is not changed, and no permission of
 * the user's directories is loosened. The command execs into the daemon, so the spawned pid is the daemon's.
 */
export function sandboxdLaunch(user?: { uid: number; gid: number }, prepare = ''): SandboxdLaunch {
  const direct = { command: process.execPath, args: [MAIN], dispose: () => {} };
  const reach = (file: string, test: '-x' | '-r') =>
    !user ||
    spawnSync(
      hostBin('setpriv'),
      [
        `--reuid=${user.uid}`,
        `--regid=${user.gid}`,
        '--clear-groups',
        '/bin/sh',
        '-c',
        `test ${test} "$1"`,
        'probe',
        file,
      ],
      { stdio: 'ignore' },
    ).status === 0;
  const nodeReachable = reach(process.execPath, '-x');
  const reachable = nodeReachable && reach(MAIN, '-r');
  if (reachable && !prepare) return { ...direct, ids: user };

  let mnt = '';
  let checkout = '';
  let node = process.execPath;
  let nodeMount = '';
  let main = MAIN;
  if (!reachable) {
    mnt = mkdtempSync(path.join(os.tmpdir(), 'paddock-sandboxd-checkout-'));
    chmodSync(mnt, 0o755);
    checkout = path.join(mnt, 'checkout');
    mkdirSync(checkout);
    main = path.join(checkout, path.relative(REPO, MAIN));
    const inRepo = path.relative(REPO, process.execPath);
    if (!inRepo.startsWith('..') && !path.isAbsolute(inRepo)) node = path.join(checkout, inRepo);
    else if (!nodeReachable) {
      nodeMount = path.join(mnt, 'node');
      writeFileSync(nodeMount, '');
    }
  }
  const mount = hostBin('mount');
  const asRoot = process.getuid?.() === 0;
  const script = [
    'set -e',
    'repo="$1" checkout="$2" node="$3" node_mount="$4" main="$5"',
    'eval "$6"',
    `if [ -n "$checkout" ]; then ${mount} --bind -- "$repo" "$checkout"; fi`,
    `if [ -n "$node_mount" ]; then ${mount} --bind -- "$node" "$node_mount"; node="$node_mount"; fi`,
    user
      ? `exec ${hostBin('setpriv')} --reuid=${user.uid} --regid=${user.gid} --clear-groups -- "$node" "$main"`
      : asRoot
        ? 'exec "$node" "$main"'
        : `exec ${hostBin('setpriv')} --inh-caps=-all --ambient-caps=-all -- "$node" "$main"`,
  ].join('\n');
  return {
    command: hostBin('unshare'),
    args: [
      ...(asRoot ? [] : ['--map-current-user', '--keep-caps']),
      '--mount',
      '--propagation',
      'private',
      '/bin/sh',
      '-c',
      script,
      'sandboxd-launch',
      REPO,
      checkout,
      node,
      nodeMount,
      main,
      prepare,
    ],
    ids: undefined,
    dispose() {
      // Never recursive: on the host these are empty (the binds live only in the daemon's namespace), and a
      // recursive removal through a bind that was somehow visible here would delete the checkout.
      if (!mnt) return;
      try {
        if (nodeMount) unlinkSync(nodeMount);
        rmdirSync(checkout);
        rmdirSync(mnt);
      } catch {}
    },
  };
}

export interface TestSandboxdOptions {
  /** Test-only host name -> IP map for the egress proxy (written to SANDBOXD_HOSTS_FILE). */
  hosts?: Record<string, string>;
  /** Reuse a data dir (e.g. to restart on the same state). */
  dataDir?: string;
  /** Reuse a token (e.g. to restart on the same state). */
  token?: string;
  /** Extra SANDBOXD_* environment (e.g. SANDBOXD_MEMORY_MAX). */
  env?: Record<string, string>;
  /** Forward the daemon's JSON logs to this process's stderr. */
  verbose?: boolean;
  /**
   * The runtime layer (agent CLIs, node, rg at /opt/paddock/<hash>/bin): true gives the daemon the test run's
   * shared layers directory (runtime-layer-cache.ts; scripts/test.ts installs it once before the tests), a
   * string another layers directory. Default: off (SANDBOXD_RUNTIME_LAYER=off), so no test installs it by
   * accident; `env.SANDBOXD_RUNTIME_LAYER` wins over both.
   */
  runtimeLayer?: boolean | string;
  /**
   * Run the daemon as this user and group (rootless mode; the caller must be root). A data dir the harness
   * creates is given to that user.
   */
  user?: { uid: number; gid: number };
  /** A shell script run first in a mount namespace of the daemon's own, able to mount (sandboxdLaunch). */
  prepare?: string;
  /**
   * The test network the daemon must reach (netns.ts). Not root, the daemon runs in that network's host
   * namespace (rootless, as the caller), and `url` is a forwarder on this process's loopback.
   */
  net?: TestNet;
}

export interface TestSandboxd {
  url: string;
  /** The daemon's pid (memory and fd checks). */
  pid: number;
  token: string;
  dataDir: string;
  /** The daemon's collected log lines (JSON). */
  logs(): string[];
  /**
   * Stops the daemon; by default also kills all sandboxes of the data dir (those of earlier daemons on it
   * too) and removes the data dir.
   */
  stop(opts?: { keepData?: boolean }): Promise<void>;
}

/** Kills the sandbox inits the data dir's records name; returns their pids. */
function killSandboxInits(dataDir: string): Set<number> {
  const killed = new Set<number>();
  const tenants = path.join(dataDir, 'tenants');
  let ts: string[] = [];
  try {
    ts = readdirSync(tenants);
  } catch {}
  for (const t of ts) {
    let names: string[] = [];
    try {
      names = readdirSync(path.join(tenants, t, 'sandboxes'));
    } catch {}
    for (const n of names) {
      try {
        const rec = JSON.parse(
          readFileSync(path.join(tenants, t, 'sandboxes', n, 'sandbox.json'), 'utf8'),
        ) as {
          init: { pid: number; startTime: string } | null;
        };
        if (!rec.init) continue;
        const stat = readFileSync(`/proc/${rec.init.pid}/stat`, 'utf8');
        const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
        if (start === rec.init.startTime) {
          process.kill(rec.init.pid, 'SIGKILL');
          killed.add(rec.init.pid);
        }
      } catch {}
    }
  }
  return killed;
}

/**
 * Pids of running exec session shims (src/exec/shim.ts, argv marker `paddock-sandboxd-shim`) that serve a
 * session: a shim works in its session directory (its cwd; a removed directory reads "<path> (deleted)"),
 * optionally only those of one data dir. Idle pre-started shims (src/exec/shim-pool.ts, cwd /) are not
 * sessions: see idleShims().
 */
export function sessionShims(dataDir?: string): number[] {
  return shimProcesses()
    .filter(({ cwd }) => (dataDir === undefined ? cwd !== '/' : cwd.startsWith(`${dataDir}/`)))
    .map(({ pid }) => pid);
}

/** Pids of pre-started shims waiting for a session (cwd /) that the daemon `parentPid` started. */
export function idleShims(parentPid: number): number[] {
  return shimProcesses()
    .filter(({ cwd, ppid }) => cwd === '/' && ppid === parentPid)
    .map(({ pid }) => pid);
}

/** The process runs (a zombie has exited). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function shimProcesses(): { pid: number; cwd: string; ppid: number }[] {
  const out: { pid: number; cwd: string; ppid: number }[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    let argv: string[];
    let cwd: string;
    let ppid: number;
    try {
      argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
      if (!argv.includes('paddock-sandboxd-shim')) continue;
      cwd = readlinkSync(`/proc/${e}/cwd`);
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      continue;
    }
    out.push({ pid: Number(e), cwd, ppid });
  }
  return out;
}

/** Unmounts what sandboxd mounted under the data dir (the sandboxes' disk images, root mode), deepest first. */
export function unmountUnder(dataDir: string): void {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) =>
      (l.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_m, o: string) =>
        String.fromCharCode(parseInt(o, 8)),
      ),
    )
    .filter((p) => p.startsWith(`${dataDir}/`))
    .sort((a, b) => b.length - a.length);
  for (const p of points) {
    try {
      execFileSync('umount', [p], { stdio: 'ignore' });
    } catch {
      try {
        execFileSync('umount', ['-l', p], { stdio: 'ignore' });
      } catch {}
    }
  }
}

/** The cgroup parents of the daemon on `dataDir` that exist (runtime/cgroups.ts naming): one per v1 controller, or the v2 one. */
export function daemonCgroupParents(dataDir: string): string[] {
  const instance = createHash('sha256').update(dataDir).digest('hex').slice(0, 12);
  const found: string[] = [];
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, ctrls, rel] = line.split(':');
    if (rel === undefined || ctrls === undefined) continue;
    const mounts =
      ctrls === ''
        ? ['/sys/fs/cgroup/unified', '/sys/fs/cgroup']
        : ctrls.split(',').map((c) => `/sys/fs/cgroup/${c.replace(/^name=/, '')}`);
    for (const m of mounts) {
      const parent = path.join(m, rel, `paddock-sandboxd-${instance}`);
      if (existsSync(parent)) found.push(parent);
    }
  }
  return found;
}

/**
 * Removes the per-data-dir cgroup subtree sandboxd created (src/runtime/cgroups.ts naming): what a daemon
 * killed outright (kill -9) leaves, or one whose sandboxes were killed around it.
 */
export function removeCgroups(dataDir: string): void {
  for (const parent of daemonCgroupParents(dataDir)) {
    for (const child of readdirSync(parent, { withFileTypes: true })) {
      if (!child.isDirectory()) continue;
      try {
        rmdirSync(path.join(parent, child.name));
      } catch {}
    }
    try {
      rmdirSync(parent);
    } catch {}
  }
}

/**
 * Removes a directory tree that may hold overlay work dirs (mode 000, made by the kernel): as a non-root
 * user they are made accessible first.
 */
export function removeTree(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    execFileSync('chmod', ['-R', 'u+rwx', '--', dir], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function startTestSandboxd(opts: TestSandboxdOptions = {}): Promise<TestSandboxd> {
  const dataDir = opts.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'sandboxd-test-'));
  if (opts.user && !opts.dataDir) chownSync(dataDir, opts.user.uid, opts.user.gid);
  const token = opts.token ?? randomBytes(24).toString('hex');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env['PATH'] ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    SANDBOXD_ADDR: '127.0.0.1:0',
    SANDBOXD_TOKEN: token,
    SANDBOXD_DATA_DIR: dataDir,
    SANDBOXD_LOG_LEVEL: 'debug',
    SANDBOXD_RUNTIME_LAYER:
      opts.runtimeLayer === true ? sharedLayerDir() : opts.runtimeLayer ? opts.runtimeLayer : 'off',
    ...opts.env,
  };
  if (opts.hosts) {
    const file = path.join(dataDir, 'test-hosts');
    writeFileSync(
      file,
      Object.entries(opts.hosts)
        .map(([name, ip]) => `${ip} ${name}\n`)
        .join(''),
    );
    env['SANDBOXD_HOSTS_FILE'] = file;
  }
  const launch = sandboxdLaunch(opts.user, opts.prepare);
  const prefix = opts.net?.sandboxdPrefix ?? null;
  if (prefix && opts.user) throw new Error('a test network of an ordinary user runs the daemon as that user');
  const [command, ...args] = prefix
    ? [...prefix, launch.command, ...launch.args]
    : [launch.command, ...launch.args];
  const child: ChildProcess = spawn(command ?? launch.command, args, {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(launch.ids ?? {}),
  });
  child.once('exit', () => launch.dispose());
  const logs: string[] = [];
  let errTail = '';
  child.stderr?.on('data', (d: Buffer) => {
    const text = d.toString();
    errTail = (errTail + text).slice(-4000);
    for (const line of text.split('\n')) if (line) logs.push(line);
    if (opts.verbose) process.stderr.write(text);
  });
  const daemonUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`sandboxd did not become ready in 20 s: ${errTail}`));
    }, 20_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.includes('"ready":true'));
      if (line) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { url: string }).url);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sandboxd exited with ${code} before ready: ${errTail}`));
    });
  });
  const forwarder = prefix && opts.net ? await forward(opts.net, daemonUrl) : null;
  const url = forwarder?.url ?? daemonUrl;
  let stopped = false;
  return {
    url,
    pid: child.pid ?? 0,
    token,
    dataDir,
    logs: () => [...logs],
    async stop(stopOpts = {}) {
      if (stopped) return;
      stopped = true;
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      forwarder?.close();
      if (!stopOpts.keepData) {
        for (const pid of sessionShims(dataDir)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {}
        }
        // Inits no record names too: one a daemon spawned but was stopped before recording it (an earlier
        // daemon of this data dir too, when it was restarted on it), or one whose record was removed under it.
        // They would outlive the test run; they are named, since sandboxd lost track of them. (Listed before
        // any is killed: an init's unshare outlives its sh, the pid recorded, by a moment.)
        const running = sandboxInitsUnder(dataDir);
        const recorded = killSandboxInits(dataDir);
        await killSandboxInitsUnder(dataDir);
        for (const lost of running.filter((init) => !recorded.has(init.pid))) {
          process.stderr.write(
            `test sandboxd: killed sandbox init ${lost.pid} (started ${lost.startedAt.toISOString()}) that no record names: ${lost.sandboxDir}\n`,
          );
        }
        await new Promise((r) => setTimeout(r, 200));
        removeCgroups(dataDir);
        unmountUnder(dataDir);
        detachLoopDevicesUnder(dataDir);
        removeTree(dataDir);
      }
    },
  };
}

/**
 * A listener on this process's loopback whose connections are piped to the daemon's API in the test network's
 * host namespace (connections made there by netns.ts's helper).
 */
async function forward(tnet: TestNet, daemonUrl: string): Promise<{ url: string; close(): void }> {
  const port = Number(new URL(daemonUrl).port);
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => client.destroy());
    tnet.hostConnect('127.0.0.1', port).then(
      (upstream) => {
        open.add(upstream);
        upstream.on('close', () => {
          open.delete(upstream);
          client.destroy();
        });
        upstream.on('error', () => upstream.destroy());
        client.on('close', () => upstream.destroy());
        if (client.destroyed) upstream.destroy();
        client.pipe(upstream);
        upstream.pipe(client);
      },
      () => client.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close() {
      server.close();
      for (const s of open) s.destroy();
    },
  };
}
