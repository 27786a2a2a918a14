// What sandboxes can reach besides the public internet, as the operator declared it to sandboxd:
// SANDBOXD_SERVICE_ROUTES (names the egress proxy dials at a fixed address, even loopback) and
// SANDBOXD_EGRESS_ALLOW_CIDRS (private ranges it may dial). The server reads the same two
// variables (docs/configuration.md "What sandboxes can reach"): `npm start` hands both processes
// one environment, and an operator who runs sandboxd apart sets them on both. The server uses
// them only to refuse a gateway base URL no sandbox can reach (inference-credentials/reach.ts);
// sandboxd alone enforces them. The syntax and the refusals are sandboxd's (apps/sandboxd/src/
// config.ts parseServiceRoutes, proxy/addresses.ts parseAllowList): a value sandboxd refuses to
// start with, the server refuses too.

import { BlockList, isIP } from 'node:net';
import { NEVER_REACHABLE_CIDRS, PRIVATE_CIDRS } from '@paddock/sandbox-client/egress-ranges';

export interface ServiceRoute {
  /** lower case, as the proxy matches it */
  name: string;
  ip: string;
  port: number;
}

export interface AllowedCidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

export interface SandboxReach {
  readonly serviceRoutes: readonly ServiceRoute[];
  readonly egressAllowCidrs: readonly AllowedCidr[];
}

const entries = (raw: string) => raw.split(/[\s,]+/).filter(Boolean);

/** `name=ip:port` entries, comma or space separated; throws a message naming the bad entry's place. */
export function parseServiceRoutes(raw: string): ServiceRoute[] {
  const routes = new Map<string, ServiceRoute>();
  entries(raw).forEach((entry, i) => {
    const m = /^([a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)=(?:\[([0-9a-f:.]+)\]|([0-9.]+)):(\d{1,5})$/i.exec(
      entry,
    );
    const ip = m ? (m[2] ?? m[3] ?? '') : '';
    const port = m ? Number(m[4]) : 0;
    if (!m?.[1]?.includes('.') || isIP(ip) === 0 || port < 1 || port > 65535)
      throw new Error(`entry ${i + 1} is not name=ip:port (e.g. paddock.internal=127.0.0.1:4000)`);
    const name = m[1].toLowerCase();
    routes.set(name, { name, ip, port });
  });
  return [...routes.values()];
}

/** Never dialled by the egress proxy, and no operator setting opens them (the sandbox interface's table). */
export const NEVER_REACHABLE: readonly string[] = NEVER_REACHABLE_CIDRS;

/** Dialled only inside SANDBOXD_EGRESS_ALLOW_CIDRS (the sandbox interface's table). */
export const PRIVATE_RANGES: readonly string[] = PRIVATE_CIDRS;

function parseCidr(text: string): AllowedCidr | null {
  const m = /^([^/%]+)(?:\/(\d{1,3}))?$/.exec(text);
  const address = (m?.[1] ?? '').replace(/^\[|\]$/g, '');
  const kind = isIP(address);
  if (!m || kind === 0) return null;
  const max = kind === 4 ? 32 : 128;
  const prefix = m[2] === undefined ? max : Number(m[2]);
  if (prefix > max) return null;
  return { address, prefix, family: kind === 4 ? 'ipv4' : 'ipv6' };
}

/** A BlockList of CIDRs (parsed, or texts such as the built-in lists above). */
export function blockListOf(cidrs: readonly (string | AllowedCidr)[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const cidr = typeof c === 'string' ? parseCidr(c) : c;
    if (cidr) list.addSubnet(cidr.address, cidr.prefix, cidr.family);
  }
  return list;
}

const never = blockListOf(NEVER_REACHABLE);
const neverCidrs = NEVER_REACHABLE.map((t) => parseCidr(t)).filter((c) => c !== null);

/** Comma or space separated CIDRs (a bare address is a /32 or /128); loopback & co. are refused. */
export function parseAllowCidrs(raw: string): AllowedCidr[] {
  return entries(raw).map((entry, i) => {
    const cidr = parseCidr(entry);
    if (!cidr) throw new Error(`entry ${i + 1} is not an IPv4 or IPv6 CIDR such as 10.20.0.0/16`);
    // Aligned ranges overlap exactly when one holds the other's first address.
    const mine = blockListOf([cidr]);
    if (
      never.check(cidr.address, cidr.family) ||
      neverCidrs.some((n) => n.family === cidr.family && mine.check(n.address, n.family))
    )
      throw new Error(
        `entry ${i + 1} overlaps a range that can never be opened (loopback, link-local, multicast, unspecified)`,
      );
    return cidr;
  });
}
