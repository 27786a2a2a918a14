/**
 * Deployment configuration, parsed once at boot. Nothing else reads process.env.
 * A blank value means "unset"; a malformed value refuses to start, naming the variable.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Level } from './log.ts';
import { type Cidr, parseAllowList } from './proxy/addresses.ts';

/** Host ids per sandbox (root mode): range 0 owns the base, sandbox slot n uses range n + 1. */
export const ID_RANGE = 65536;
export const ID_SLOTS = 4095;
/** PATH of host-side processes (runtime/host-tools.ts): system directories only. */
export const HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface Limits {
  /** bytes; 0 = no limit */
  memoryBytes: number;
  /** 0 = no limit */
  pidsMax: number;
  /** CPU cores (fractional allowed); 0 = no limit */
  cpus: number;
  /**
   * bytes of disk per sandbox (its writable layer, on its own filesystem image; root mode only, see
   * runtime/disks.ts); 0 = no limit
   */
  diskBytes: number;
}

export interface SandboxdOptions {
  host: string;
  port: number;
  tokens: string[];
  dataDir: string;
  rootfs?: string;
  limits: Limits;
  /** Bytes of exec output kept per session for replay (head dropped beyond it). */
  sessionBufferBytes: number;
  /**
   * Test/dev only: host name -> IP address map used by the egress proxy instead of DNS.
   * Names listed here are exempt from the private/loopback address refusal.
   */
  hostsOverride: Map<string, string>;
  /**
   * SANDBOXD_SERVICE_ROUTES: names the proxy dials at a fixed address and port even where the
   * address is loopback or this host's (the platform service beside sandboxd, for the sandboxes'
   * callbacks). Exactly that name and port; the network policy still applies by name.
   */
  serviceRoutes: Map<string, ServiceRoute>;
  /** Private ranges the egress proxy may reach (SANDBOXD_EGRESS_ALLOW_CIDRS); never the host or loopback. */
  egressAllow: Cidr[];
  proxy: {
    /** Concurrent proxy connections per sandbox. */
    connectionsMax: number;
    handshakeTimeoutMs: number;
    idleTimeoutMs: number;
  };
  logLevel: Level;
  /** `auto`: readable lines when stderr is a terminal outside production, JSON lines otherwise. */
  logFormat?: 'json' | 'pretty' | 'auto';
  /**
   * Root mode: first host uid/gid of the ids sandboxd uses: 65536 for the base, then 65536 per sandbox
   * (runtime/base.ts sandboxIds, ID_SLOTS sandboxes at most).
   */
  idBase: number;
  /** Checkpoints kept per sandbox; creating one more removes the oldest. */
  checkpointsMax: number;
  /** Where the host helpers (nsenter, unshare, ...) are looked up once at start: sandboxd's own PATH. */
  toolPath: string;
  /** SANDBOXD_RUNTIME_LAYER: the agent CLIs' shared read-only layer (runtime/layer.ts). */
  runtimeLayer: LayerSetting;
}

export class ConfigError extends Error {}

export const MIN_DISK_BYTES = 32 * 1024 * 1024;

export const DEFAULTS = {
  addr: '127.0.0.1:7070',
  dataDir: './.paddock/sandboxd',
  memory: '4g',
  pids: 2048,
  cpus: 2,
  disk: '10g',
  sessionBufferMb: 16,
  checkpointsMax: 5,
  // Above systemd's container range (524288-1879048191) and every /etc/subuid allocation Debian's useradd
  // makes (100000 upwards, 65536 each); the span ends below 2^31 (runtime/id-ranges.ts).
  idBase: 1879048192,
  proxyConnectionsMax: 256,
  proxyHandshakeTimeoutS: 10,
  proxyIdleTimeoutS: 300,
} as const;

function blank(v: string | undefined): v is undefined {
  return v === undefined || v.trim() === '';
}

export function parseBytes(name: string, raw: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?$/i.exec(raw.trim());
  if (!m)
    throw new ConfigError(`${name} must be a byte size such as 512m, 4g or 0 (got ${JSON.stringify(raw)})`);
  const mult: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };
  return Math.floor(Number(m[1]) * (mult[(m[2] ?? '').toLowerCase()] ?? 1));
}

function parseNonNegInt(name: string, raw: string): number {
  if (!/^\d+$/.test(raw.trim()))
    throw new ConfigError(`${name} must be a non-negative integer (got ${JSON.stringify(raw)})`);
  return Number(raw.trim());
}

function parseNonNegNumber(name: string, raw: string): number {
  if (!/^\d+(\.\d+)?$/.test(raw.trim()))
    throw new ConfigError(`${name} must be a non-negative number (got ${JSON.stringify(raw)})`);
  return Number(raw.trim());
}

export function parseAddr(name: string, raw: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(raw.trim());
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535)
    throw new ConfigError(`${name} must be host:port, e.g. 127.0.0.1:7070 (got ${JSON.stringify(raw)})`);
  return { host: m[1] ?? (m[2] || '127.0.0.1'), port };
}

/** Parses an /etc/hosts-style file: "<ip> <name> [<name>...]" lines, # comments. */
export interface ServiceRoute {
  ip: string;
  port: number;
}

/** `name=ip:port` entries, comma or space separated (`paddock.internal=127.0.0.1:4000`). */
export function parseServiceRoutes(raw: string): Map<string, ServiceRoute> {
  const map = new Map<string, ServiceRoute>();
  for (const entry of raw.split(/[\s,]+/).filter(Boolean)) {
    const m = /^([a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)=(?:\[([0-9a-f:.]+)\]|([0-9.]+)):(\d{1,5})$/i.exec(
      entry,
    );
    const ip = m ? (m[2] ?? m[3] ?? '') : '';
    const port = m ? Number(m[4]) : 0;
    if (!m || net.isIP(ip) === 0 || port < 1 || port > 65535 || !m[1]?.includes('.')) {
      throw new ConfigError(
        `SANDBOXD_SERVICE_ROUTES: ${JSON.stringify(entry)} is not name=ip:port (e.g. paddock.internal=127.0.0.1:4000)`,
      );
    }
    map.set(m[1].toLowerCase(), { ip, port });
  }
  return map;
}

export function parseHostsFile(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text.split('\n')) {
    const fields = line.replace(/#.*/, '').trim().split(/\s+/).filter(Boolean);
    const [ip, ...names] = fields;
    if (!ip) continue;
    for (const n of names) map.set(n.toLowerCase(), ip);
  }
  return map;
}

/** Where the runtime layer lives (runtime/layer.ts): off, in the data dir, or a shared directory. */
export type LayerSetting = { mode: 'off' } | { mode: 'auto' } | { mode: 'dir'; dir: string };

/** `auto` (in the data dir), `off`, or a layers directory (absolute, or relative to the working directory). */
export function parseRuntimeLayer(raw: string | undefined, cwd: string): LayerSetting {
  if (blank(raw) || raw.trim() === 'auto') return { mode: 'auto' };
  const v = raw.trim();
  if (v === 'off') return { mode: 'off' };
  // A path: something with a slash or a leading dot, so a typo of auto/off is not taken for a directory.
  if (!/[/.]/.test(v[0] ?? '') || /[\0\n]/.test(v))
    throw new ConfigError(
      `SANDBOXD_RUNTIME_LAYER must be auto, off or a directory path such as /var/cache/paddock/runtime-layer (got ${JSON.stringify(raw)})`,
    );
  return { mode: 'dir', dir: path.resolve(cwd, v) };
}

export function loadConfig(env: NodeJS.ProcessEnv, cwd = process.cwd()): SandboxdOptions {
  const tokenRaw = env['SANDBOXD_TOKEN'];
  if (blank(tokenRaw))
    throw new ConfigError('SANDBOXD_TOKEN is required: set it to the bearer token clients must send');
  const tokens = tokenRaw
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const { host, port } = parseAddr(
    'SANDBOXD_ADDR',
    blank(env['SANDBOXD_ADDR']) ? DEFAULTS.addr : env['SANDBOXD_ADDR'],
  );
  const dataDir = path.resolve(
    cwd,
    blank(env['SANDBOXD_DATA_DIR']) ? DEFAULTS.dataDir : env['SANDBOXD_DATA_DIR'],
  );
  let rootfs: string | undefined;
  if (!blank(env['SANDBOXD_ROOTFS'])) rootfs = path.resolve(cwd, env['SANDBOXD_ROOTFS']);
  const limits: Limits = {
    memoryBytes: parseBytes(
      'SANDBOXD_MEMORY_MAX',
      blank(env['SANDBOXD_MEMORY_MAX']) ? DEFAULTS.memory : env['SANDBOXD_MEMORY_MAX'],
    ),
    pidsMax: blank(env['SANDBOXD_PIDS_MAX'])
      ? DEFAULTS.pids
      : parseNonNegInt('SANDBOXD_PIDS_MAX', env['SANDBOXD_PIDS_MAX']),
    cpus: blank(env['SANDBOXD_CPUS'])
      ? DEFAULTS.cpus
      : parseNonNegNumber('SANDBOXD_CPUS', env['SANDBOXD_CPUS']),
    diskBytes: parseBytes(
      'SANDBOXD_DISK_MAX',
      blank(env['SANDBOXD_DISK_MAX']) ? DEFAULTS.disk : env['SANDBOXD_DISK_MAX'],
    ),
  };
  // mkfs.ext4 needs room for its journal and metadata; below this a sandbox could not even start.
  if (limits.diskBytes > 0 && limits.diskBytes < MIN_DISK_BYTES)
    throw new ConfigError('SANDBOXD_DISK_MAX must be 0 (no limit) or at least 32m');
  const checkpointsMax = blank(env['SANDBOXD_CHECKPOINTS_MAX'])
    ? DEFAULTS.checkpointsMax
    : parseNonNegInt('SANDBOXD_CHECKPOINTS_MAX', env['SANDBOXD_CHECKPOINTS_MAX']);
  if (checkpointsMax < 1) throw new ConfigError('SANDBOXD_CHECKPOINTS_MAX must be at least 1');
  const bufMb = blank(env['SANDBOXD_SESSION_BUFFER_MB'])
    ? DEFAULTS.sessionBufferMb
    : parseNonNegInt('SANDBOXD_SESSION_BUFFER_MB', env['SANDBOXD_SESSION_BUFFER_MB']);
  if (bufMb < 1) throw new ConfigError('SANDBOXD_SESSION_BUFFER_MB must be at least 1');
  let hostsOverride = new Map<string, string>();
  if (!blank(env['SANDBOXD_HOSTS_FILE'])) {
    try {
      hostsOverride = parseHostsFile(readFileSync(path.resolve(cwd, env['SANDBOXD_HOSTS_FILE']), 'utf8'));
    } catch (err) {
      throw new ConfigError(`SANDBOXD_HOSTS_FILE cannot be read: ${(err as Error).message}`);
    }
  }
  const serviceRoutes = blank(env['SANDBOXD_SERVICE_ROUTES'])
    ? new Map<string, ServiceRoute>()
    : parseServiceRoutes(env['SANDBOXD_SERVICE_ROUTES']);
  let egressAllow: Cidr[] = [];
  if (!blank(env['SANDBOXD_EGRESS_ALLOW_CIDRS'])) {
    try {
      egressAllow = parseAllowList(env['SANDBOXD_EGRESS_ALLOW_CIDRS']);
    } catch (err) {
      throw new ConfigError(`SANDBOXD_EGRESS_ALLOW_CIDRS: ${(err as Error).message}`);
    }
  }
  const positive = (name: string, dflt: number): number => {
    const raw = env[name];
    if (blank(raw)) return dflt;
    const n = parseNonNegInt(name, raw);
    if (n < 1) throw new ConfigError(`${name} must be at least 1`);
    return n;
  };
  const proxy = {
    connectionsMax: positive('SANDBOXD_PROXY_CONNECTIONS_MAX', DEFAULTS.proxyConnectionsMax),
    handshakeTimeoutMs: positive('SANDBOXD_PROXY_HANDSHAKE_TIMEOUT', DEFAULTS.proxyHandshakeTimeoutS) * 1000,
    idleTimeoutMs: positive('SANDBOXD_PROXY_IDLE_TIMEOUT', DEFAULTS.proxyIdleTimeoutS) * 1000,
  };
  const levelRaw = blank(env['SANDBOXD_LOG_LEVEL']) ? 'info' : env['SANDBOXD_LOG_LEVEL'].trim();
  if (!['debug', 'info', 'warn', 'error'].includes(levelRaw)) {
    throw new ConfigError(
      `SANDBOXD_LOG_LEVEL must be one of debug, info, warn, error (got ${JSON.stringify(levelRaw)})`,
    );
  }
  const formatRaw = blank(env['SANDBOXD_LOG_FORMAT']) ? 'auto' : env['SANDBOXD_LOG_FORMAT'].trim();
  if (formatRaw !== 'auto' && formatRaw !== 'json' && formatRaw !== 'pretty') {
    throw new ConfigError(`SANDBOXD_LOG_FORMAT must be json or pretty (got ${JSON.stringify(formatRaw)})`);
  }
  const idBase = blank(env['SANDBOXD_ID_BASE'])
    ? DEFAULTS.idBase
    : parseNonNegInt('SANDBOXD_ID_BASE', env['SANDBOXD_ID_BASE']);
  const span = ID_RANGE * (ID_SLOTS + 1);
  if (idBase < 1 || idBase > 4294967294 - span)
    throw new ConfigError(
      `SANDBOXD_ID_BASE must be between 1 and ${4294967294 - span} (it is followed by ${span} ids)`,
    );
  return {
    host,
    port,
    tokens,
    dataDir,
    ...(rootfs ? { rootfs } : {}),
    limits,
    sessionBufferBytes: bufMb * 1024 * 1024,
    hostsOverride,
    serviceRoutes,
    egressAllow,
    proxy,
    logLevel: levelRaw as Level,
    logFormat: formatRaw,
    idBase,
    checkpointsMax,
    toolPath: blank(env['PATH']) ? HOST_PATH : env['PATH'],
    runtimeLayer: parseRuntimeLayer(env['SANDBOXD_RUNTIME_LAYER'], cwd),
  };
}
