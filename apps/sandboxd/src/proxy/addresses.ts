/**
 * Which destination addresses the egress proxy may dial. The proxy runs in the host's network namespace,
 * so anything the host can reach, a sandbox could reach through it: this module is what keeps the host
 * itself and the networks behind it out of reach.
 *
 * Invariants (proved by test/security.egress.test.ts, attacks end to end, and test/addresses.test.ts):
 * - never dialled, whatever the configuration: loopback, unspecified, link-local (cloud metadata),
 *   multicast and broadcast, and every address of this host (all interfaces, v4 and v6, re-read at most
 *   HOST_ADDRESSES_TTL_MS after a change);
 * - not dialled unless the operator lists them in SANDBOXD_EGRESS_ALLOW_CIDRS: every other range the IANA
 *   special-purpose registries mark not globally reachable (RFC 1918, CGNAT 100.64/10, ULA fc00::/7,
 *   documentation and benchmarking ranges, ...);
 * - an IPv6 address that carries an IPv4 address (IPv4-mapped, -compatible, -translated, NAT64 64:ff9b::/96,
 *   6to4 2002::/16) is refused if the IPv4 address is;
 * - the check runs on the address actually dialled (after DNS or the hosts override), so a name that
 *   resolves to a refused address (DNS rebinding) is refused like the address itself.
 */
import net from 'node:net';
import os from 'node:os';
import { NEVER_REACHABLE_CIDRS, PRIVATE_CIDRS } from '@paddock/sandbox-client/egress-ranges';

/** How long a read of the host's interface addresses is reused. */
export const HOST_ADDRESSES_TTL_MS = 1000;

interface Addr {
  v: 4 | 6;
  b: Uint8Array;
}

export interface Cidr {
  v: 4 | 6;
  b: Uint8Array;
  bits: number;
  /** as written by the operator, for messages */
  text: string;
}

function parseV4(s: string): Uint8Array | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  const b = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    b[i] = Number(p);
  }
  return b;
}

function parseV6(s: string): Uint8Array | null {
  let text = s.replace(/%.*$/, '');
  const b = new Uint8Array(16);
  // A trailing dotted quad fills the last 32 bits.
  const quad = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let tail: Uint8Array | null = null;
  if (quad) {
    tail = parseV4(quad[1]!);
    if (!tail) return null;
    text = `${text.slice(0, quad.index)}:0:0`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groups = (h: string) => (h === '' ? [] : h.split(':'));
  const head = groups(halves[0]!);
  const rest = halves.length === 2 ? groups(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if ((halves.length === 1 && missing !== 0) || missing < 0) return null;
  const all = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...rest];
  for (let i = 0; i < 8; i++) {
    const g = all[i]!;
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
    const n = Number.parseInt(g, 16);
    b[i * 2] = n >> 8;
    b[i * 2 + 1] = n & 0xff;
  }
  if (tail) b.set(tail, 12);
  return b;
}

export function parseAddress(ip: string): Addr | null {
  const s = ip.trim().replace(/^\[|\]$/g, '');
  const kind = net.isIP(s.replace(/%.*$/, ''));
  if (kind === 4) {
    const b = parseV4(s);
    return b ? { v: 4, b } : null;
  }
  if (kind === 6) {
    const b = parseV6(s);
    return b ? { v: 6, b } : null;
  }
  return null;
}

/** Parses `a.b.c.d/n`, `v6/n` or a bare address (a /32 or /128); null when malformed. */
export function parseCidr(text: string): Cidr | null {
  const m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(text.trim());
  if (!m) return null;
  const a = parseAddress(m[1]!);
  if (!a || m[1]!.includes('%')) return null;
  const max = a.v === 4 ? 32 : 128;
  const bits = m[2] === undefined ? max : Number(m[2]);
  if (bits > max) return null;
  return { v: a.v, b: a.b, bits, text: text.trim() };
}

function cidr(text: string): Cidr {
  const c = parseCidr(text);
  if (!c) throw new Error(`bad built-in CIDR ${text}`);
  return c;
}

function matchBits(a: Uint8Array, b: Uint8Array, bits: number): boolean {
  const whole = bits >> 3;
  for (let i = 0; i < whole; i++) if (a[i] !== b[i]) return false;
  const rest = bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return ((a[whole] ?? 0) & mask) === ((b[whole] ?? 0) & mask);
}

function inCidr(a: Addr, c: Cidr): boolean {
  return a.v === c.v && matchBits(a.b, c.b, c.bits);
}

function overlaps(x: Cidr, y: Cidr): boolean {
  return x.v === y.v && matchBits(x.b, y.b, Math.min(x.bits, y.bits));
}

/** Never dialled, and no operator setting can open them. */
const NEVER: readonly Cidr[] = NEVER_REACHABLE_CIDRS.map(cidr);

/** Not globally reachable (IANA special-purpose registries): refused unless SANDBOXD_EGRESS_ALLOW_CIDRS lists them. */
const PRIVATE: readonly Cidr[] = PRIVATE_CIDRS.map(cidr);

/** The IPv4 address an IPv6 address carries, in the forms a host or gateway may route as IPv4. */
function embeddedV4(a: Addr): Addr | null {
  if (a.v !== 6) return null;
  const b = a.b;
  const zero = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  const v4 = (at: number): Addr => ({ v: 4, b: b.slice(at, at + 4) });
  // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), ::ffff:0:a.b.c.d (translated)
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12);
  if (zero(0, 12)) return v4(12);
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && b[10] === 0 && b[11] === 0) return v4(12);
  // NAT64 well-known prefix 64:ff9b::/96
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) return v4(12);
  // 6to4 2002:AABB:CCDD::/48
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2);
  return null;
}

/**
 * Parses the operator's allow list (comma or space separated CIDRs). Throws an Error saying which entry is
 * wrong: malformed, or one that would open a range that is never reachable (loopback, link-local, ...).
 */
export function parseAllowList(raw: string): Cidr[] {
  const out: Cidr[] = [];
  for (const entry of raw.split(/[\s,]+/).filter(Boolean)) {
    const c = parseCidr(entry);
    if (!c) throw new Error(`${JSON.stringify(entry)} is not an IPv4 or IPv6 CIDR such as 10.20.0.0/16`);
    const never = NEVER.find((n) => overlaps(n, c));
    if (never)
      throw new Error(
        `${JSON.stringify(entry)} overlaps ${never.text}: loopback, link-local, multicast and unspecified addresses can never be opened`,
      );
    out.push(c);
  }
  return out;
}

type Interfaces = () => NodeJS.Dict<os.NetworkInterfaceInfo[]>;

export interface EgressGuard {
  /** Whether the proxy may dial this (resolved) address. */
  permits(ip: string): boolean;
}

/**
 * One guard per daemon, shared by every sandbox's proxy. `interfaces` is os.networkInterfaces (a parameter
 * for the unit tests); it is re-read at most every HOST_ADDRESSES_TTL_MS, so an address added to the host
 * after start is refused within that time.
 */
export function createEgressGuard(deps: {
  allow: readonly Cidr[];
  interfaces?: Interfaces;
  now?: () => number;
}): EgressGuard {
  const interfaces = deps.interfaces ?? os.networkInterfaces;
  const now = deps.now ?? Date.now;
  let host: Addr[] = [];
  let readAt = Number.NEGATIVE_INFINITY;
  const hostAddresses = (): Addr[] => {
    const t = now();
    if (t - readAt < HOST_ADDRESSES_TTL_MS) return host;
    const next: Addr[] = [];
    for (const list of Object.values(interfaces())) {
      for (const info of list ?? []) {
        const a = parseAddress(info.address);
        if (a) next.push(a);
      }
    }
    host = next;
    readAt = t;
    return host;
  };
  const same = (x: Addr, y: Addr) => x.v === y.v && x.b.every((byte, i) => byte === y.b[i]);
  return {
    permits(ip) {
      const a = parseAddress(ip);
      if (!a) return false;
      const inner = embeddedV4(a);
      const forms = inner ? [a, inner] : [a];
      const mine = hostAddresses();
      for (const f of forms) {
        if (NEVER.some((c) => inCidr(f, c))) return false;
        if (mine.some((h) => same(h, f))) return false;
      }
      for (const f of forms) {
        if (PRIVATE.some((c) => inCidr(f, c)) && !deps.allow.some((c) => inCidr(f, c))) return false;
      }
      return true;
    },
  };
}
