// The named resources (environments, vaults, agents): their API paths, table columns, and
// lookup by name or id.
import type { ApiClient } from './client.ts';
import { ApiError, CliError } from './errors.ts';

export type Row = Record<string, unknown>;

export interface ResourceType {
  path: string;
  singular: string;
  columns: Array<[string, (r: Row) => string]>;
}

export const when = (r: Row) => String(r['updated_at'] ?? '').replace(/\.\d{3}Z$/, 'Z');
export const RESOURCES: Record<string, ResourceType> = {
  environments: {
    path: '/api/environments',
    singular: 'environment',
    columns: [
      ['NAME', (r) => String(r['name'])],
      ['ID', (r) => String(r['id'])],
      ['NETWORK', (r) => String(r['networking_type'])],
      ['AGENTS', (r) => String(r['agent_count'])],
      ['SECRETS', (r) => String(r['secret_count'])],
      ['UPDATED', when],
    ],
  },
  vaults: {
    path: '/api/vaults',
    singular: 'vault',
    columns: [
      ['NAME', (r) => String(r['name'])],
      ['ID', (r) => String(r['id'])],
      ['SECRETS', (r) => String(r['secret_count'])],
      ['AGENTS', (r) => String(r['agent_count'])],
      ['UPDATED', when],
    ],
  },
  agents: {
    path: '/api/agents',
    singular: 'agent',
    columns: [
      ['NAME', (r) => String(r['name'])],
      ['ID', (r) => String(r['id'])],
      ['RUNTIME', (r) => String(r['runtime'])],
      ['MODEL', (r) => String(r['model'])],
      ['SKILLS', (r) => String((r['skills'] as unknown[] | undefined)?.length ?? 0)],
      ['UPDATED', when],
    ],
  },
};
const ALIASES: Record<string, string> = {
  environment: 'environments',
  env: 'environments',
  envs: 'environments',
  vault: 'vaults',
  agent: 'agents',
};

export function resourceType(word: string): ResourceType {
  const key = ALIASES[word] ?? word;
  const type = RESOURCES[key];
  if (!type) throw new CliError(`unknown resource type "${word}": use environments, vaults or agents`, [], 2);
  return type;
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function findOne(client: ApiClient, type: ResourceType, nameOrId: string): Promise<Row> {
  if (UUID.test(nameOrId)) {
    try {
      return await client.request<Row>('GET', `${type.path}/${nameOrId}`);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
    }
  }
  const list = await client.request<{ data: Row[] }>('GET', type.path);
  const found = list.data.find((r) => r['name'] === nameOrId);
  if (!found) throw new CliError(`${type.singular} "${nameOrId}" not found`);
  return found;
}
