// The `network` stage's policy (spec: Sandbox interface rule 6, plus issue 10's provider hosts).
//
// Invariants (network.test.ts):
// - `unrestricted` sends nothing: a sandbox is open by default, and an empty rules list would
//   mean the same (allow-all) at the cost of a call.
// - `limited` with hosts: one allow rule per host, nothing else; the backend denies every name
//   no rule matches, so only those hosts are reachable (no `include: 'defaults'`: the tenant's
//   list is the whole list).
// - The hosts of a `limited` environment are its allowed_hosts plus the inference provider
//   host of the agent's runtime (providerHostsFor): the host of the provider's base URL in the
//   sandbox env (an account credential's base URL, or an environment/vault variable of that
//   name), else the provider's default API host. Nothing else is added, and never for another
//   provider: an agent only needs the provider its runtime talks to.
// - `limited` with no hosts at all: exactly one rule `{domain: '*', action: 'deny'}`, without
//   `include: 'defaults'` — nothing is reachable.
import type { NetworkPolicy } from '@paddock/sandbox-client';
import type { Runtime } from '../../agents/agents.tables.ts';
import { providerHost, runtimeProvider } from '../../inference-credentials/providers.ts';

export interface NetworkSettings {
  networking_type: 'unrestricted' | 'limited';
  networking_config: { allowed_hosts?: string[] } | null;
}

/**
 * The inference provider host an agent's runtime must reach, given the sandbox env: at most
 * one host; none when the runtime's provider cannot be told (an opencode model of another
 * provider) or its base URL names an IP address (the egress proxy allows host names only).
 */
export function providerHostsFor(
  agent: { runtime: Runtime; model: string },
  env: Readonly<Record<string, string>>,
): string[] {
  const provider = runtimeProvider(agent.runtime, agent.model);
  if (provider === null) return [];
  const host = providerHost(provider, env);
  return host === null ? [] : [host];
}

/** The policy to send, or null when none is sent (unrestricted). */
export function networkPolicyFor(
  settings: NetworkSettings,
  providerHosts: readonly string[] = [],
): NetworkPolicy | null {
  if (settings.networking_type !== 'limited') return null;
  const hosts = [...new Set([...(settings.networking_config?.allowed_hosts ?? []), ...providerHosts])];
  if (hosts.length === 0) return { rules: [{ domain: '*', action: 'deny' }] };
  return { rules: hosts.map((domain) => ({ domain, action: 'allow' as const })) };
}
