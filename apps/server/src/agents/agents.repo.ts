// SQL for agents and their vault allowlists. Every method takes the tenant id first.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { AgentInput } from './agents.schema.ts';
import type { Runtime } from './agents.tables.ts';

const COLUMNS = [
  'id',
  'name',
  'model',
  'runtime',
  'environment_id',
  'system',
  'description',
  'skills',
  'mcp_servers',
  'metadata',
  'created_at',
  'updated_at',
] as const;

export type AgentRow = NonNullable<Awaited<ReturnType<typeof findAgent>>>;

export interface AgentFilters {
  search?: string;
  runtime?: Runtime;
  environmentId?: string;
  hasSkills?: boolean;
  hasMcp?: boolean;
}

function fields(input: AgentInput) {
  return {
    name: input.name,
    model: input.model,
    runtime: input.runtime,
    environment_id: input.environment_id,
    system: input.system,
    description: input.description,
    skills: JSON.stringify(input.skills),
    mcp_servers: JSON.stringify(input.mcp_servers),
    metadata: JSON.stringify(input.metadata),
  };
}

export async function findAgent(db: Db, tenantId: string, id: string) {
  return await db
    .selectFrom('agents')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findAgentByName(db: Db, tenantId: string, name: string) {
  return await db
    .selectFrom('agents')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
}

function likePattern(search: string): string {
  return `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export async function listAgents(db: Db, tenantId: string, filters: AgentFilters) {
  let q = db.selectFrom('agents').select(COLUMNS).where('tenant_id', '=', tenantId);
  if (filters.search) {
    const pattern = likePattern(filters.search);
    q = q.where((eb) =>
      eb.or([
        sql<boolean>`${eb.ref('name')} ILIKE ${pattern} ESCAPE '\\'`,
        sql<boolean>`${eb.ref('description')} ILIKE ${pattern} ESCAPE '\\'`,
      ]),
    );
  }
  if (filters.runtime) q = q.where('runtime', '=', filters.runtime);
  if (filters.environmentId) q = q.where('environment_id', '=', filters.environmentId);
  if (filters.hasSkills !== undefined)
    q = q.where(sql<boolean>`(jsonb_array_length(skills) > 0) = ${filters.hasSkills}`);
  if (filters.hasMcp !== undefined)
    q = q.where(sql<boolean>`(mcp_servers <> '{}'::jsonb) = ${filters.hasMcp}`);
  return await q.orderBy('name').execute();
}

export async function insertAgent(db: Db, tenantId: string, id: string, input: AgentInput) {
  return await db
    .insertInto('agents')
    .values({ id, tenant_id: tenantId, ...fields(input) })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function updateAgent(db: Db, tenantId: string, id: string, input: AgentInput) {
  return await db
    .updateTable('agents')
    .set({ ...fields(input), updated_at: sql<Date>`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning(COLUMNS)
    .executeTakeFirst();
}

export async function deleteAgent(db: Db, tenantId: string, id: string): Promise<boolean> {
  const res = await db
    .deleteFrom('agents')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

export async function replaceAgentVaults(
  db: Db,
  tenantId: string,
  agentId: string,
  vaultIds: readonly string[],
): Promise<void> {
  await db
    .deleteFrom('agent_vaults')
    .where('tenant_id', '=', tenantId)
    .where('agent_id', '=', agentId)
    .execute();
  if (vaultIds.length === 0) return;
  await db
    .insertInto('agent_vaults')
    .values(vaultIds.map((vault_id) => ({ tenant_id: tenantId, agent_id: agentId, vault_id })))
    .execute();
}

export async function vaultIdsByAgent(
  db: Db,
  tenantId: string,
  agentIds: readonly string[],
): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (agentIds.length === 0) return out;
  const rows = await db
    .selectFrom('agent_vaults')
    .select(['agent_id', 'vault_id'])
    .where('tenant_id', '=', tenantId)
    .where('agent_id', 'in', agentIds)
    .orderBy('vault_id')
    .execute();
  for (const r of rows) out.set(r.agent_id, [...(out.get(r.agent_id) ?? []), r.vault_id]);
  return out;
}

export async function replaceAgentDelegates(
  db: Db,
  tenantId: string,
  agentId: string,
  delegateIds: readonly string[],
): Promise<void> {
  await db
    .deleteFrom('agent_delegates')
    .where('tenant_id', '=', tenantId)
    .where('agent_id', '=', agentId)
    .execute();
  if (delegateIds.length === 0) return;
  await db
    .insertInto('agent_delegates')
    .values(
      delegateIds.map((delegate_agent_id) => ({ tenant_id: tenantId, agent_id: agentId, delegate_agent_id })),
    )
    .execute();
}

export async function delegateIdsByAgent(
  db: Db,
  tenantId: string,
  agentIds: readonly string[],
): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (agentIds.length === 0) return out;
  const rows = await db
    .selectFrom('agent_delegates')
    .select(['agent_id', 'delegate_agent_id'])
    .where('tenant_id', '=', tenantId)
    .where('agent_id', 'in', agentIds)
    .orderBy('delegate_agent_id')
    .execute();
  for (const r of rows) out.set(r.agent_id, [...(out.get(r.agent_id) ?? []), r.delegate_agent_id]);
  return out;
}

/** The ids among `ids` that are agents of the tenant. */
export async function existingAgentIds(db: Db, tenantId: string, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom('agents')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', ids)
    .execute();
  return rows.map((r) => r.id);
}
