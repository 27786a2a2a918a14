// The reasons sandboxd's egress proxy gives for a refused request, in one place for both sides:
// the proxy words its 403 answers with them (apps/sandboxd/src/proxy/proxy.ts), and the server
// recognises them in what a client printed (an install's output, an agent CLI's error) to name
// the setting that opens the way. A client prints the reason phrase or the body, so the patterns
// match the reason alone, whatever the host.

/** The host is outside the sandbox's network policy. */
export function deniedReason(host: string): string {
  return `egress to ${host} is denied by the sandbox network policy`;
}

/** The host resolves to an address outside the public internet (and SANDBOXD_EGRESS_ALLOW_CIDRS). */
export function notPublicReason(host: string): string {
  return `egress to ${host} is refused: not a public address`;
}

export const EGRESS_DENIED = /is denied by the sandbox network policy/;
export const EGRESS_NOT_PUBLIC = /is refused: not a public address/;
