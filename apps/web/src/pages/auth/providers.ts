import { type ApiData, api } from '../../api/client';
import { useApi } from '../../api/use-api';

export type Providers = ApiData<'/api/auth/providers'>;

/** The sign-in methods of this instance: OAuth buttons appear only when it lists one. */
export function useProviders() {
  return useApi((signal) => api.get('/api/auth/providers', { signal }), []);
}

export const PROVIDER_LABELS: Record<string, string> = { github: 'GitHub' };
