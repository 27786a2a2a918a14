// The named resources (environments, vaults, agents): their API paths, table columns, and
// lookup by name or id.
import type { ApiClient } from './client.ts';
import { ApiError, CliError } from './errors.ts';

export type Row = Record<string, unknown>;

export interface ResourceType {
  path: string;
  singular: string;
  /** The manifest's `kind` of this type (`paddock get <type> <name>` prints that document). */
  kind: 'Environment' | 'Vault' | 'Agent';
  columns: Array<[string, (r: Row) => string]>;
}

export const when = (r: Row) => String(r['updated_at'] ?? '').replace(/\.\d{3}Z$/, 'Z');
export const RESOURCES: Record<string, ResourceType> = {
  environments: {
    path: '/api/environments',
    singular: 'environment',
    kind: 'Environment',
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
    kind: 'Vault',
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
    kind: 'Agent',
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

export interface ManifestDocument {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: Row;
}

/**
 * One resource as the manifest document `paddock apply -f` takes back unchanged: the
 * server's export (secrets as `${env:KEY}` placeholders, the agent's environment and vaults
 * by name), never the API's view with ids and counts.
 */
export async function manifestOf(client: ApiClient, type: ResourceType, one: Row): Promise<ManifestDocument> {
  const exported = await client.request<{ documents: ManifestDocument[] }>('GET', '/api/apply/export');
  const doc = exported.documents.find((d) => d.kind === type.kind && d.metadata.name === one['name']);
  if (!doc) throw new CliError(`${type.singular} "${String(one['name'])}" not found`);
  return doc;
}
