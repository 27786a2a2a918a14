// The address ranges of the sandbox interface's egress rule, in one place for both sides:
// sandboxd's proxy enforces them (apps/sandboxd/src/proxy/addresses.ts), and the server reads
// them to refuse a gateway base URL no sandbox can reach (apps/server/src/config/sandbox-reach.ts).

/** Never dialled by the egress proxy, and no operator setting (SANDBOXD_EGRESS_ALLOW_CIDRS) opens them. */
export const NEVER_REACHABLE_CIDRS: readonly string[] = [
  '0.0.0.0/8',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/128',
  '::1/128',
  'fe80::/10',
  'ff00::/8',
];

/** Not globally reachable (IANA special-purpose registries): dialled only inside SANDBOXD_EGRESS_ALLOW_CIDRS. */
export const PRIVATE_CIDRS: readonly string[] = [
  '10.0.0.0/8',
  '100.64.0.0/10',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  'fc00::/7',
  'fec0::/10',
  '64:ff9b:1::/48',
  '100::/64',
  '2001::/23',
  '2001:db8::/32',
  '3fff::/20',
];
