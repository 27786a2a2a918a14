// The `network` stage's policy (spec: Sandbox interface rule 6).
//
// Invariants:
// - `unrestricted` sends nothing: a sandbox is open by default, and an empty rules list would
//   mean the same (allow-all) at the cost of a call.
// - `limited` with hosts: one allow rule per host, nothing else; the backend denies every name
//   no rule matches, so only those hosts are reachable (no `include: 'defaults'`: the tenant's
//   list is the whole list).
// - `limited` with no hosts: exactly one rule `{domain: '*', action: 'deny'}`, without
//   `include: 'defaults'` — nothing is reachable.
import type { NetworkPolicy } from '@paddock/sandbox-client';

export interface NetworkSettings {
  networking_type: 'unrestricted' | 'limited';
  networking_config: { allowed_hosts?: string[] } | null;
}

/** The policy to send, or null when none is sent (unrestricted). */
export function networkPolicyFor(settings: NetworkSettings): NetworkPolicy | null {
  if (settings.networking_type !== 'limited') return null;
  const hosts = [...new Set(settings.networking_config?.allowed_hosts ?? [])];
  if (hosts.length === 0) return { rules: [{ domain: '*', action: 'deny' }] };
  return { rules: hosts.map((domain) => ({ domain, action: 'allow' as const })) };
}
