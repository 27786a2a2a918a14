/**
 * Programmatic entry point: startSandboxd(options) -> { url, token, close() }.
 * close() stops the HTTP server and sandboxd's side of every sandbox (proxy listeners, sessions);
 * sandbox inits keep running and are adopted by the next sandboxd on the same data directory.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { DEFAULTS, HOST_PATH, type SandboxdOptions } from './config.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { createHttpServer } from './http/server.ts';
import { createLogger, type Logger } from './log.ts';
import { ensureBase, ensureDevTemplate, sandboxIds } from './runtime/base.ts';
import { detectCgroups } from './runtime/cgroups.ts';
import { detectDisks } from './runtime/disks.ts';
import { HOST_ENV, type HostTools, resolveHostTools } from './runtime/host-tools.ts';
import { assertNoSubidOverlap, type SubidFiles } from './runtime/id-ranges.ts';
import { createRuntimeLayer } from './runtime/layer.ts';
import { checkPerlListener, NamespaceRuntime } from './runtime/namespaces.ts';
import { createSandboxesService } from './sandboxes.service.ts';
import { loadTenantKey, migrateTenantDirs, tenantHasher } from './tenants.ts';

export type { SandboxdOptions } from './config.ts';
export { ConfigError, loadConfig } from './config.ts';

export interface StartOptions extends Partial<Omit<SandboxdOptions, 'tokens' | 'limits' | 'proxy'>> {
  tokens: string[];
  limits?: Partial<SandboxdOptions['limits']>;
  proxy?: Partial<SandboxdOptions['proxy']>;
  logger?: Logger;
  /** Root mode: the subordinate id files checked for overlap (tests); /etc/subuid and /etc/subgid. */
  subidFiles?: SubidFiles;
  /**
   * The environment the runtime layer's npm runs with (the operator's registry, proxy and CA settings;
   * main.ts gives its own). Default: PATH only.
   */
  installEnv?: NodeJS.ProcessEnv;
}

export interface RunningSandboxd {
  url: string;
  token: string;
  close(): Promise<void>;
}

/**
 * Rootless mode needs unprivileged user namespaces. Without them every sandbox would fail
 * at its first exec; refuse to start instead, saying why (rootless.test.ts).
 */
function assertUserNamespaces(tools: HostTools): void {
  const probe = spawnSync(
    tools.unshare,
    ['--user', '--map-root-user', '--mount', '--pid', '--fork', '--net', 'true'],
    {
      encoding: 'utf8',
      timeout: 10_000,
      env: HOST_ENV,
    },
  );
  if (probe.status === 0) return;
  const detail = (probe.stderr || probe.error?.message || `exit ${probe.status}`).trim();
  throw new Error(
    `unprivileged user namespaces are not available to this user (${detail}): run sandboxd as root, or allow ` +
      'them (kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0); see docs/sandboxd.md "Rootless"',
  );
}

export async function startSandboxd(input: StartOptions): Promise<RunningSandboxd> {
  if (input.tokens.length === 0) throw new Error('startSandboxd: at least one token is required');
  const opts: SandboxdOptions = {
    host: input.host ?? '127.0.0.1',
    port: input.port ?? 0,
    tokens: input.tokens,
    dataDir: input.dataDir ?? DEFAULTS.dataDir,
    ...(input.rootfs ? { rootfs: input.rootfs } : {}),
    limits: {
      memoryBytes: 4 * 1024 ** 3,
      pidsMax: DEFAULTS.pids,
      cpus: DEFAULTS.cpus,
      diskBytes: 10 * 1024 ** 3,
      ...input.limits,
    },
    sessionBufferBytes: input.sessionBufferBytes ?? DEFAULTS.sessionBufferMb * 1024 * 1024,
    hostsOverride: input.hostsOverride ?? new Map(),
    serviceRoutes: input.serviceRoutes ?? new Map(),
    egressAllow: input.egressAllow ?? [],
    proxy: {
      connectionsMax: DEFAULTS.proxyConnectionsMax,
      handshakeTimeoutMs: DEFAULTS.proxyHandshakeTimeoutS * 1000,
      idleTimeoutMs: DEFAULTS.proxyIdleTimeoutS * 1000,
      ...input.proxy,
    },
    logLevel: input.logLevel ?? 'info',
    idBase: input.idBase ?? DEFAULTS.idBase,
    checkpointsMax: input.checkpointsMax ?? DEFAULTS.checkpointsMax,
    toolPath: input.toolPath ?? HOST_PATH,
    runtimeLayer: input.runtimeLayer ?? { mode: 'off' },
  };
  const log = input.logger ?? createLogger(opts.logLevel);
  // Resolved once, through the operator's PATH; every host-side spawn uses these absolute paths.
  const found = resolveHostTools(opts.toolPath);
  // The proxy listen helper: perl when it works with this node (checked once), else node's (namespaces.ts).
  const listen = await checkPerlListener(found.perl);
  if (found.perl && !listen.perl)
    log.warn('the perl proxy listen helper failed its check; sandbox starts use the node helper', {
      reason: listen.reason,
    });
  const tools: HostTools = { ...found, perl: listen.perl };
  const rootless = process.getuid?.() !== 0;
  if (rootless) assertUserNamespaces(tools);
  else assertNoSubidOverlap(opts.idBase, input.subidFiles);
  mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  // Before anything of the directory is read or written: one daemon per data directory.
  const unlock = await lockDataDir(opts.dataDir);
  try {
    return await serve(opts, input, log, tools, rootless, unlock);
  } catch (err) {
    unlock();
    throw err;
  }
}

/** Everything after the data directory is this process's: the daemon itself. */
async function serve(
  opts: SandboxdOptions,
  input: StartOptions,
  log: Logger,
  tools: HostTools,
  rootless: boolean,
  unlock: () => void,
): Promise<RunningSandboxd> {
  const self = rootless ? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 } : null;
  // Root mode: the base belongs to host root, like the host's /usr (base.ts).
  const base = ensureBase(
    opts.dataDir,
    self ? sandboxIds(opts.idBase, null, self) : { rootHostId: 0, userHostId: 0 },
    opts.rootfs,
    tools,
  );
  const instance = createHash('sha256').update(opts.dataDir).digest('hex').slice(0, 12);
  const cgroups = detectCgroups(opts.limits, instance, log);
  const layer = createRuntimeLayer({
    setting: opts.runtimeLayer,
    dataDir: opts.dataDir,
    install: { toolPath: opts.toolPath, env: input.installEnv ?? { PATH: opts.toolPath } },
    log,
  });
  const runtime = new NamespaceRuntime({
    base,
    devTemplate: ensureDevTemplate(opts.dataDir),
    rootless,
    tools,
    layerSource: layer.mountSource,
  });
  const tenantOf = tenantHasher(loadTenantKey(opts.dataDir));
  migrateTenantDirs(opts.dataDir, opts.tokens, tenantOf, log);
  const disks = await detectDisks({
    dataDir: opts.dataDir,
    bytes: opts.limits.diskBytes,
    rootless,
    toolPath: opts.toolPath,
    log,
  });
  const service = createSandboxesService({
    opts,
    log,
    cgroups,
    runtime,
    idsFor: (slot) => sandboxIds(opts.idBase, slot, self),
    tools,
    hostDirs: base.hostDirs,
    caBundle: base.caBundle,
    disks,
    // Read for every exec: the layer goes on PATH once it is ready (RuntimeLayer.readyBin).
    get layerBin() {
      return layer.readyBin();
    },
  });
  await service.load();
  const server = createHttpServer({ service, layer, tokens: opts.tokens, tenantOf, log });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;
  log.info('sandboxd listening', {
    url,
    dataDir: opts.dataDir,
    rootless,
    cgroups: cgroups.mode,
    rootfs: opts.rootfs ?? null,
    runtimeLayer: layer.status().state,
  });
  // In the background: boot (and sandboxes without the CLIs) never wait for it.
  layer.start();
  return {
    url,
    token: opts.tokens[0]!,
    async close() {
      layer.stop();
      service.shutdown();
      cgroups.release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      unlock();
    },
  };
}
