import { type ApiData, api } from './client';
import { useApi } from './use-api';

export type Site = ApiData<'/api/site'>;

/** What the public pages show: price (billing on), whether legal pages exist. */
export function useSite() {
  return useApi((signal) => api.get('/api/site', { signal }), []);
}
