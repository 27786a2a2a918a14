// Whether a sandbox can reach a gateway base URL at all (issue 37, finding 1). A sandbox reaches
// the network only through sandboxd's egress proxy, which never dials loopback or this host's
// addresses and dials private ranges only inside SANDBOXD_EGRESS_ALLOW_CIDRS; a name of
// SANDBOXD_SERVICE_ROUTES is dialled at its declared address, on its declared port only
// (docs/sandboxd.md "Network", "Service routes"). A base URL outside all of that fails every turn
// after minutes of retries, so it is refused when it is set, saying what the operator declares.
//
// Invariants (test/inference-credentials.reach.http.test.ts):
// - Only the operator opens loopback or private addresses (the server's environment, read at
//   boot): nothing a tenant sends widens what is accepted.
// - A name is judged by what it resolves to here; a name that does not resolve here (it may
//   resolve where sandboxd runs) is accepted. Public addresses are always accepted.
// - This host's own addresses count as loopback when sandboxd runs on this host (its
//   SANDBOX_BASE_URL is loopback), as the proxy refuses them.
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { blockListOf, NEVER_REACHABLE, PRIVATE_RANGES, type SandboxReach } from '../config/sandbox-reach.ts';

/** How long a name's lookup may take before the name is accepted unjudged. */
const LOOKUP_TIMEOUT_MS = 2000;

export interface GatewayReach {
  /** Why no sandbox can reach this (already well-formed) base URL, or null. */
  problem(baseUrl: string): Promise<string | null>;
}

export interface GatewayReachOptions {
  /** sandboxd runs on this host: its addresses are refused like loopback. */
  sandboxdOnThisHost: boolean;
  /** The addresses a name resolves to (dns.lookup; a parameter for tests). */
  resolve?: (host: string) => Promise<string[]>;
}

const family = (ip: string) => (isIP(ip) === 6 ? 'ipv6' : 'ipv4');
const never = blockListOf(NEVER_REACHABLE);
const loopback = blockListOf(['127.0.0.0/8', '::1/128']);
const privateRanges = blockListOf(PRIVATE_RANGES);

async function resolveHost(host: string): Promise<string[]> {
  const timeout = new Promise<string[]>((ok) => setTimeout(ok, LOOKUP_TIMEOUT_MS, []).unref());
  const found = lookup(host, { all: true }).then(
    (all) => all.map((a) => a.address),
    () => [],
  );
  return await Promise.race([found, timeout]);
}

function ownAddresses(): Set<string> {
  const all = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  return new Set(all.map((i) => i.address.replace(/%.*$/, '').toLowerCase()));
}

export function createGatewayReach(reach: SandboxReach, options: GatewayReachOptions): GatewayReach {
  const routes = new Map(reach.serviceRoutes.map((r) => [r.name, r]));
  const allowed = blockListOf(reach.egressAllowCidrs);
  const resolve = options.resolve ?? resolveHost;

  /** Why the proxy refuses this address, or null when it dials it. */
  const refusal = (ip: string, own: Set<string>): 'this machine' | 'never' | 'private' | null => {
    if (loopback.check(ip, family(ip)) || own.has(ip.toLowerCase())) return 'this machine';
    if (never.check(ip, family(ip))) return 'never';
    if (privateRanges.check(ip, family(ip)) && !allowed.check(ip, family(ip))) return 'private';
    return null;
  };

  return {
    async problem(baseUrl) {
      const url = new URL(baseUrl);
      const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
      const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
      const route = routes.get(host);
      if (route) {
        if (route.port === port) return null;
        return `the service route ${host} is declared for port ${route.port} only: use ${url.protocol}//${host}:${route.port}`;
      }
      const loopbackName = host === 'localhost' || host.endsWith('.localhost');
      const addresses = isIP(host) ? [host] : loopbackName ? ['127.0.0.1'] : await resolve(host);
      if (addresses.length === 0) return null;
      const own = options.sandboxdOnThisHost ? ownAddresses() : new Set<string>();
      const refusals = addresses.map((ip) => refusal(ip, own));
      if (refusals.some((r) => r === null)) return null;
      // The most fixable refusal is explained: an opened range, then a route.
      const reason = (['private', 'this machine', 'never'] as const).find((r) => refusals.includes(r));
      const ip = addresses[refusals.indexOf(reason ?? 'never')] ?? host;
      const named = isIP(host) ? host : `${host} (${ip})`;
      // The operator already routes a name to this address and port: that name is the answer.
      const declared = reach.serviceRoutes.find(
        (r) => r.ip.toLowerCase() === ip.toLowerCase() && r.port === port,
      );
      if (declared)
        return `no sandbox can reach ${named} directly; the operator routes ${declared.name} to it: use ${url.protocol}//${declared.name}:${port}${url.pathname === '/' ? '' : url.pathname}`;
      const routeExample = `SANDBOXD_SERVICE_ROUTES=gateway.internal=${isIP(ip) === 6 ? `[${ip}]` : ip}:${port}`;
      const useRoute = `and the base URL names it: ${url.protocol}//gateway.internal:${port}${url.pathname === '/' ? '' : url.pathname}`;
      if (reason === 'private')
        return `no sandbox can reach ${named}: it is a private address the operator has not opened. The operator lists its range in SANDBOXD_EGRESS_ALLOW_CIDRS (e.g. ${ip}${isIP(ip) === 6 ? '/128' : '/32'}), or declares a service route (${routeExample}) ${useRoute}`;
      if (reason === 'this machine')
        return `no sandbox can reach ${named}: it is this machine, which sandboxes never reach directly. The operator declares a service route for the gateway (${routeExample}) ${useRoute}`;
      return `no sandbox can reach ${named}: link-local, multicast and unspecified addresses are never dialled. Use the gateway's routable address or a name for it`;
    },
  };
}

/** Whether the sandbox backend at `baseUrl` (SANDBOX_BASE_URL) runs on this host: a loopback URL. */
export function sandboxdOnThisHost(baseUrl: string | undefined): boolean {
  if (baseUrl === undefined) return false;
  const host = new URL(baseUrl).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    (isIP(host) !== 0 && loopback.check(host, family(host)))
  );
}
