// Agents and vaults as the conversation pages need them: names for ids, the vault allowlist.
import { type ApiData, api } from './client';
import { useApi } from './use-api';

export type Agent = ApiData<'/api/agents'>['data'][number];
export type Vault = ApiData<'/api/vaults'>['data'][number];

export function useAgents() {
  return useApi((signal) => api.get('/api/agents', { signal }).then((r) => r.data), []);
}

export function useVaults(enabled = true) {
  return useApi(
    (signal) => (enabled ? api.get('/api/vaults', { signal }).then((r) => r.data) : Promise.resolve([])),
    [enabled],
  );
}
