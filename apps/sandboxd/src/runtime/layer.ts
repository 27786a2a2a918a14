/**
 * The runtime layer: the agent CLIs (claude, codex, gemini, opencode), Node and ripgrep, installed once into
 * a directory shared read-only by every sandbox (docs/sandboxd.md, "Runtime layer").
 *
 * Layout of the layers directory (`<dataDir>/runtime-layer`, or the directory SANDBOXD_RUNTIME_LAYER names):
 *   <hash>/            a complete layer: bin/ (what goes on PATH), node_modules/, layer.json (its spec)
 *   <hash>.partial/    an install in progress (owner.json: pid and start time of the installing process)
 * `<hash>` is the hash of runtime-layer.json's content, the CPU architecture and which of its host tools the
 * host has: a bump (or a host tool installed since, e.g. ripgrep) installs a new directory beside the old
 * one, which stays usable by the sandboxes still running from it until pruned.
 * Every sandbox sees the whole layers directory read-only at LAYER_MOUNT (a read-only overlay of it, so its
 * mountinfo shows no host path), and its execs get `LAYER_MOUNT/<hash>/bin` first on PATH once the layer is
 * ready, so a layer that becomes ready after the sandbox started appears in its next exec (a directory
 * rename on the host, seen through the overlay: the name is looked up only once it is there).
 *
 * Invariants:
 * - A directory named `<hash>` is complete: it is only ever made by renaming a finished `<hash>.partial`
 *   (a crash or kill mid-install leaves a `.partial`, never a ready-looking layer; layer.test.ts).
 * - One installer per layer: `<hash>.partial` is taken with mkdir (atomic); another process (a second
 *   sandboxd, the test runner) waits for its owner, and takes over a partial whose owner is dead.
 * - The installer's npm dies with its owner (setpriv --pdeathsig), so a killed sandboxd leaves no process
 *   writing into a partial that the next one removes.
 * - Package install scripts do not run (`--ignore-scripts`) except those named in installScripts (claude's
 *   and opencode's copy their platform binary, already installed as an optional dependency, into place;
 *   neither downloads anything).
 * - Every file is readable (and directories traversable) by anyone: the sandbox user is an unmapped id in
 *   root mode, and sees the files through their "other" bits. The mount is read-only and nosuid.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  constants,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { HOST_PATH, type LayerSetting } from '../config.ts';
import type { Logger } from '../log.ts';
import { LAYER_MOUNT } from './base.ts';
import { processStartTime } from './namespaces.ts';

export { LAYER_MOUNT };

export const SPEC_FILE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'runtime-layer.json',
);

export interface RuntimeSpec {
  package: string;
  version: string;
  bin: string;
}

export interface LayerSpec {
  node: string;
  runtimes: Record<string, RuntimeSpec>;
  extra: Record<string, string>;
  installScripts: string[];
  hostTools: string[];
}

export function loadLayerSpec(file = SPEC_FILE): LayerSpec {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as LayerSpec & { $comment?: string };
  const { $comment: _comment, ...spec } = raw;
  return spec;
}

/**
 * The layer's directory name: the spec, the format of this installer, the CPU architecture and the host
 * tools the host has (a layer installed without one is not the layer of a host that has it: once the tool
 * is installed, the next start installs the layer again, with it). `toolPath`: where else the installer
 * looks for them (besides HOST_PATH).
 */
export function layerHash(spec: LayerSpec, toolPath = '', arch: string = process.arch): string {
  const tools = spec.hostTools.filter((t) => hostTool(t, toolPath) !== null);
  return createHash('sha256')
    .update(JSON.stringify({ v: 2, arch, spec, tools }))
    .digest('hex')
    .slice(0, 16);
}

/** Where the installer copies host tool `tool` from: HOST_PATH first, then `toolPath`. */
function hostTool(tool: string, toolPath: string): string | null {
  return which(HOST_PATH, tool) ?? (toolPath ? which(toolPath, tool) : null);
}

/** The npm packages of a layer, in install order (`name@version`). */
export function layerPackages(spec: LayerSpec, arch: string = process.arch): string[] {
  return [
    `node-linux-${arch}@${spec.node}`,
    ...Object.values(spec.runtimes).map((r) => `${r.package}@${r.version}`),
    ...Object.entries(spec.extra).map(([name, v]) => `${name}@${v}`),
  ];
}

export type LayerStateName = 'installing' | 'ready' | 'failed' | 'off';

export interface LayerStatus {
  state: LayerStateName;
  /** the layer's hash (its directory name); null when off */
  version: string | null;
  /** inside a sandbox: the layer's directory and what goes on PATH */
  path: string | null;
  bin: string | null;
  /** pinned versions: npm package name → version */
  packages: Record<string, string>;
  /** while installing: the step under way */
  progress: { step: number; steps: number; current: string; elapsed_ms: number } | null;
  /** when failed: why (the npm output's tail; no secrets: npm prints none of its configuration) */
  error: string | null;
}

export interface RuntimeLayer {
  /** Inside a sandbox: the layer's bin directory (null: no layer, off). */
  readonly binPath: string | null;
  /**
   * binPath once the layer is there (null before, and when off): what an exec gets on PATH. Each sandbox sees
   * the layers directory through an overlay (namespaces.ts), which keeps a name looked up before it existed
   * as missing; a PATH lookup before the layer is ready would hide it from that sandbox until it restarts.
   */
  readyBin(): string | null;
  /** Host directory mounted read-only at LAYER_MOUNT in every sandbox (an overlay of it; null: off). */
  readonly mountSource: string | null;
  status(): LayerStatus;
  /** Starts the install in the background when the layer is not ready (no-op when off or ready). */
  start(): void;
  stop(): void;
}

/** Which npm and which environment the installer uses (the operator's: sandboxd's own PATH and env). */
export interface InstallEnv {
  /** sandboxd's PATH, where npm (and rg, setpriv) are looked up */
  toolPath: string;
  /** the environment npm runs with (registry, proxy and CA settings of the operator) */
  env: NodeJS.ProcessEnv;
}

function which(searchPath: string, tool: string): string | null {
  for (const dir of searchPath.split(':').filter((d) => path.isAbsolute(d))) {
    const candidate = path.join(dir, tool);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {}
  }
  return null;
}

/**
 * The environment of the installer's npm: the operator's, without the variables an enclosing `npm run`
 * sets for its own script (npm_lifecycle_*, npm_package_*, a global prefix), which would change where and
 * what npm installs.
 */
export function installerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (/^npm_(lifecycle|package|command|execpath|node_execpath)/i.test(k)) continue;
    if (/^npm_config_(prefix|global|location|save|dry_run|ignore_scripts|omit|include)$/i.test(k)) continue;
    out[k] = v;
  }
  out['PATH'] = env['PATH'] || HOST_PATH;
  return out;
}

interface Progress {
  step: number;
  steps: number;
  current: string;
  started: number;
}

class InstallError extends Error {}

/** Runs a command, collecting the tail of its output; rejects with it on a non-zero exit. */
function run(
  argv: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; children: Set<ChildProcess> },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    opts.children.add(child);
    let tail = '';
    const keep = (d: Buffer) => {
      tail = (tail + d.toString()).slice(-2000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.stdout.on('error', () => {}); // the child's 'close' reports the end
    child.stderr.on('error', () => {});
    child.on('error', (err) => {
      opts.children.delete(child);
      reject(new InstallError(`${path.basename(argv[0]!)}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      opts.children.delete(child);
      if (code === 0) resolve();
      else
        reject(
          new InstallError(
            `${argv.slice(0, 3).join(' ')} … failed (${signal ?? `exit ${code}`}): ${tail.trim().split('\n').slice(-8).join('\n')}`,
          ),
        );
    });
  });
}

interface Owner {
  pid: number;
  start: string | null;
}

function readOwner(partial: string): Owner | null {
  try {
    return JSON.parse(readFileSync(path.join(partial, 'owner.json'), 'utf8')) as Owner;
  } catch {
    return null;
  }
}

function ownerAlive(o: Owner): boolean {
  return o.start !== null && processStartTime(o.pid) === o.start;
}

/**
 * Installs layer `hash` of `spec` into `root` unless it is there; resolves with its directory. Waits for
 * another live installer of the same layer; takes over the partial of a dead one. `onProgress` is called
 * at each step; `children` collects the running commands (stop() kills them).
 */
export async function installLayer(input: {
  root: string;
  spec: LayerSpec;
  install: InstallEnv;
  log: Logger;
  onProgress?: (p: Progress) => void;
  children?: Set<ChildProcess>;
  signal?: AbortSignal;
}): Promise<string> {
  const { root, spec, log } = input;
  const hash = layerHash(spec, input.install.toolPath);
  const dir = path.join(root, hash);
  const partial = `${dir}.partial`;
  const children = input.children ?? new Set<ChildProcess>();
  mkdirSync(root, { recursive: true, mode: 0o755 });
  for (;;) {
    if (existsSync(dir)) return dir;
    input.signal?.throwIfAborted();
    try {
      mkdirSync(partial, { mode: 0o755 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = readOwner(partial);
    let young = false;
    try {
      young = Date.now() - statSync(partial).mtimeMs < 30_000;
    } catch {}
    if ((owner && ownerAlive(owner)) || (!owner && young)) {
      // Another process installs it; wait for its rename (or its death).
      await sleep(1000, undefined, input.signal ? { signal: input.signal } : {});
      continue;
    }
    log.warn('runtime layer: removing the partial install of a stopped installer', { layer: hash });
    rmSync(partial, { recursive: true, force: true });
  }
  writeFileSync(
    path.join(partial, 'owner.json'),
    JSON.stringify({ pid: process.pid, start: processStartTime(process.pid) }),
  );
  try {
    await build(partial, spec, input, children);
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
  rmSync(path.join(partial, 'owner.json'), { force: true });
  renameSync(partial, dir);
  return dir;
}

async function build(
  partial: string,
  spec: LayerSpec,
  input: { install: InstallEnv; log: Logger; onProgress?: (p: Progress) => void },
  children: Set<ChildProcess>,
): Promise<void> {
  const { install, log } = input;
  const npm = which(install.toolPath, 'npm');
  if (!npm) throw new InstallError(`npm not found on PATH (${install.toolPath})`);
  // The installer's commands die with this process (invariant: no orphan writes into a partial).
  const setpriv = which(install.toolPath, 'setpriv');
  const guard = (argv: string[]) => (setpriv ? [setpriv, '--pdeathsig', 'KILL', '--', ...argv] : argv);
  const env = installerEnv(install.env);
  writeFileSync(
    path.join(partial, 'package.json'),
    `${JSON.stringify({ name: 'paddock-runtime-layer', private: true, description: 'see layer.json' }, null, 2)}\n`,
  );
  const packages = layerPackages(spec);
  const steps = packages.length + 2;
  const started = Date.now();
  const flags = ['--no-audit', '--no-fund', '--no-update-notifier', '--save-exact', '--prefix', partial];
  for (const [i, pkg] of packages.entries()) {
    input.onProgress?.({ step: i + 1, steps, current: pkg, started });
    const t0 = Date.now();
    log.info('runtime layer: installing', { package: pkg, step: `${i + 1}/${steps}` });
    await run(guard([npm, 'install', '--ignore-scripts', ...flags, pkg]), { cwd: partial, env, children });
    log.info('runtime layer: installed', { package: pkg, seconds: Math.round((Date.now() - t0) / 100) / 10 });
  }
  input.onProgress?.({ step: steps - 1, steps, current: 'running install scripts', started });
  if (spec.installScripts.length > 0) {
    const t0 = Date.now();
    await run(guard([npm, 'rebuild', '--ignore-scripts=false', ...flags, ...spec.installScripts]), {
      cwd: partial,
      env,
      children,
    });
    log.info('runtime layer: install scripts run', {
      packages: spec.installScripts,
      seconds: Math.round((Date.now() - t0) / 100) / 10,
    });
  }
  input.onProgress?.({ step: steps, steps, current: 'linking the commands', started });
  const bin = path.join(partial, 'bin');
  mkdirSync(bin, { mode: 0o755 });
  symlinkSync(
    path.join('..', 'node_modules', `node-linux-${process.arch}`, 'bin', 'node'),
    path.join(bin, 'node'),
  );
  for (const r of Object.values(spec.runtimes)) {
    const target = path.join(partial, 'node_modules', '.bin', r.bin);
    if (!existsSync(target)) throw new InstallError(`${r.package} installed no ${r.bin} command`);
    symlinkSync(path.join('..', 'node_modules', '.bin', r.bin), path.join(bin, r.bin));
  }
  for (const tool of spec.hostTools) {
    const found = hostTool(tool, install.toolPath);
    if (!found) {
      log.warn('runtime layer: host tool not found, left out (install it: scripts/ci-system-deps.sh)', {
        tool,
      });
      continue;
    }
    copyFileSync(found, path.join(bin, tool));
  }
  writeFileSync(
    path.join(partial, 'layer.json'),
    `${JSON.stringify({ hash: path.basename(partial, '.partial'), arch: process.arch, spec }, null, 2)}\n`,
  );
  // Readable and traversable by anyone (invariant); nothing gains a write or setuid bit.
  await run(guard(['chmod', '-R', 'a+rX,u+w,go-w,ug-s', partial]), { cwd: partial, env, children });
  log.info('runtime layer: ready', { seconds: Math.round((Date.now() - started) / 1000) });
}

/** Layer directories of other specs (`<hash>` and stale partials) in `root`, for pruning. */
export function otherLayers(root: string, keep: string): string[] {
  let names: string[] = [];
  try {
    names = readdirSync(root);
  } catch {}
  return names
    .filter((n) => /^[0-9a-f]{16}(\.partial)?$/.test(n) && n !== keep && n !== `${keep}.partial`)
    .map((n) => path.join(root, n));
}

/**
 * The runtime layer of one sandboxd. `auto`: in `<dataDir>/runtime-layer`, older layers pruned once the
 * current one is ready. A directory: that layers directory (shared, e.g. by a test run's daemons; nothing
 * pruned there, other users may run other versions from it).
 */
export function createRuntimeLayer(input: {
  setting: LayerSetting;
  dataDir: string;
  install: InstallEnv;
  log: Logger;
  spec?: LayerSpec;
  retryMs?: number;
}): RuntimeLayer {
  const { setting, log } = input;
  const spec = input.spec ?? loadLayerSpec();
  const hash = layerHash(spec, input.install.toolPath);
  const packages: Record<string, string> = {};
  for (const p of layerPackages(spec)) {
    const at = p.lastIndexOf('@');
    packages[p.slice(0, at)] = p.slice(at + 1);
  }
  if (setting.mode === 'off') {
    return {
      binPath: null,
      mountSource: null,
      readyBin: () => null,
      status: () => ({
        state: 'off',
        version: null,
        path: null,
        bin: null,
        packages,
        progress: null,
        error: null,
      }),
      start() {},
      stop() {},
    };
  }
  const root = setting.mode === 'dir' ? setting.dir : path.join(input.dataDir, 'runtime-layer');
  mkdirSync(root, { recursive: true, mode: 0o755 });
  // The sandbox user reads it through its "other" bits (invariant): a directory made 0700 (mkdtemp, a
  // restrictive umask) would hide every layer.
  if ((statSync(root).mode & 0o005) !== 0o005) chmodSync(root, 0o755);
  const dir = path.join(root, hash);
  let state: LayerStateName = existsSync(dir) ? 'ready' : 'installing';
  let progress: Progress | null = null;
  let error: string | null = null;
  let running = false;
  let stopped = false;
  const children = new Set<ChildProcess>();
  const abort = new AbortController();
  let retryTimer: NodeJS.Timeout | null = null;

  const prune = () => {
    if (setting.mode !== 'auto') return;
    for (const old of otherLayers(root, hash)) {
      if (old.endsWith('.partial')) {
        const owner = readOwner(old);
        if (owner && ownerAlive(owner)) continue;
      }
      log.info('runtime layer: removing an older layer', { layer: path.basename(old) });
      rmSync(old, { recursive: true, force: true });
    }
  };

  const attempt = async () => {
    if (running || stopped) return;
    running = true;
    state = 'installing';
    error = null;
    try {
      await installLayer({
        root,
        spec,
        install: input.install,
        log,
        children,
        signal: abort.signal,
        onProgress: (p) => {
          progress = p;
        },
      });
      state = 'ready';
      progress = null;
      prune();
    } catch (err) {
      if (stopped) return;
      state = 'failed';
      progress = null;
      error = err instanceof Error ? err.message : String(err);
      log.error('runtime layer: install failed', { layer: hash, error });
      retryTimer = setTimeout(() => void attempt(), input.retryMs ?? 5 * 60_000);
      retryTimer.unref();
    } finally {
      running = false;
    }
  };

  return {
    binPath: `${LAYER_MOUNT}/${hash}/bin`,
    mountSource: root,
    readyBin: () => (state === 'ready' || existsSync(dir) ? `${LAYER_MOUNT}/${hash}/bin` : null),
    status: () => {
      // Another process (a second daemon on a shared directory) may have finished it.
      if (state !== 'ready' && existsSync(dir)) {
        state = 'ready';
        progress = null;
        error = null;
      }
      return {
        state,
        version: hash,
        path: `${LAYER_MOUNT}/${hash}`,
        bin: `${LAYER_MOUNT}/${hash}/bin`,
        packages,
        progress: progress
          ? {
              step: progress.step,
              steps: progress.steps,
              current: progress.current,
              elapsed_ms: Date.now() - progress.started,
            }
          : null,
        error,
      };
    },
    start() {
      if (state === 'ready') {
        prune();
        return;
      }
      log.info('runtime layer: preparing in the background', { layer: hash, dir: root });
      void attempt();
    },
    stop() {
      stopped = true;
      abort.abort();
      if (retryTimer) clearTimeout(retryTimer);
      for (const c of children) c.kill('SIGKILL');
    },
  };
}
