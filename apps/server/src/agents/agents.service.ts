// Agents: CRUD with list filters, the environment reference and the vault allowlist, and the
// upsert-by-name used by bulk apply. A referenced environment or vault must belong to the
// caller's tenant; a foreign id answers exactly like a missing one (404).
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { findEnvironment } from '../environments/environments.repo.ts';
import { AppError } from '../http/errors.ts';
import { createNamedResource, type UpsertAction } from '../resources/named-resource.ts';
import { canonicalJson, isForeignKeyViolation, type ResourceContext } from '../secrets/context.ts';
import { isUuid } from '../secrets/fields.ts';
import { findVaultsByIds } from '../vaults/vaults.repo.ts';
import {
  type AgentFilters,
  type AgentRow,
  deleteAgent,
  findAgent,
  findAgentByName,
  insertAgent,
  listAgents,
  replaceAgentVaults,
  updateAgent,
  vaultIdsByAgent,
} from './agents.repo.ts';
import type { AgentInput, AgentViewT } from './agents.schema.ts';

export interface AgentsService {
  list(ctx: ResourceContext, filters: AgentFilters): Promise<AgentViewT[]>;
  get(ctx: ResourceContext, id: string): Promise<AgentViewT>;
  create(ctx: ResourceContext, input: AgentInput): Promise<AgentViewT>;
  update(ctx: ResourceContext, id: string, input: AgentInput): Promise<AgentViewT>;
  remove(ctx: ResourceContext, id: string): Promise<void>;
  /** Bulk apply: references already resolved to ids of the caller's tenant. */
  upsertByName(
    ctx: ResourceContext,
    input: AgentInput,
    trx: Db,
  ): Promise<{ id: string; action: UpsertAction }>;
}

function normalized(input: AgentInput): AgentInput {
  return {
    ...input,
    environment_id: input.environment_id?.toLowerCase() ?? null,
    vault_ids: [...new Set(input.vault_ids.map((v) => v.toLowerCase()))].sort(),
  };
}

function mutable(row: AgentRow, vaultIds: string[]): AgentInput {
  return {
    name: row.name,
    model: row.model,
    runtime: row.runtime,
    environment_id: row.environment_id,
    vault_ids: [...vaultIds].sort(),
    system: row.system,
    description: row.description,
    skills: row.skills,
    mcp_servers: row.mcp_servers,
    metadata: row.metadata,
  };
}

export function createAgentsService(deps: { db: Db; audit: Pick<AuditService, 'record'> }): AgentsService {
  const { db, audit } = deps;

  const views = async (conn: Db, tenantId: string, rows: AgentRow[]): Promise<AgentViewT[]> => {
    const vaults = await vaultIdsByAgent(
      conn,
      tenantId,
      rows.map((r) => r.id),
    );
    return rows.map((r) => ({
      id: r.id,
      ...mutable(r, vaults.get(r.id) ?? []),
      // Conversations do not exist yet; the count joins them once they do.
      conversation_count: 0,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    }));
  };

  /** Both references must exist in the caller's tenant. */
  const checkReferences = async (conn: Db, tenantId: string, input: AgentInput): Promise<void> => {
    if (input.environment_id && !(await findEnvironment(conn, tenantId, input.environment_id))) {
      throw AppError.notFound('environment');
    }
    const found = await findVaultsByIds(conn, tenantId, input.vault_ids);
    if (found.length !== input.vault_ids.length) throw AppError.notFound('vault');
  };

  const core = createNamedResource({
    db,
    audit,
    noun: 'agent',
    nameConstraint: 'agents_tenant_id_name_key',
    nameTaken: 'an agent with this name already exists',
    events: {
      created: 'agent.created',
      updated: 'agent.updated',
      deleted: 'agent.deleted',
      idKey: 'agent_id',
    },
    find: findAgent,
    findByName: findAgentByName,
    insert: async (conn, tenantId, id, input: AgentInput) => {
      await checkReferences(conn, tenantId, input);
      const row = await insertAgent(conn, tenantId, id, input);
      await replaceAgentVaults(conn, tenantId, row.id, input.vault_ids);
      return row;
    },
    update: async (conn, tenantId, id, input) => {
      await checkReferences(conn, tenantId, input);
      const row = await updateAgent(conn, tenantId, id, input);
      if (row) await replaceAgentVaults(conn, tenantId, row.id, input.vault_ids);
      return row;
    },
    delete: deleteAgent,
    views,
    unchanged: async (conn, tenantId, row, input) => {
      const vaults = (await vaultIdsByAgent(conn, tenantId, [row.id])).get(row.id) ?? [];
      return canonicalJson(mutable(row, vaults)) === canonicalJson(input);
    },
    normalize: normalized,
    // A referenced environment or vault deleted between the check and the write: the
    // request was valid when checked, so this is a conflict with a concurrent change (409),
    // not a missing reference (404, answered by checkReferences).
    mapError: (err) =>
      isForeignKeyViolation(err)
        ? new AppError(
            'conflict',
            'a referenced environment or vault was deleted while the agent was being saved; try again',
          )
        : undefined,
  });

  return {
    async list(ctx, filters) {
      if (filters.environmentId !== undefined && !isUuid(filters.environmentId)) return [];
      return await views(db, ctx.tenantId, await listAgents(db, ctx.tenantId, filters));
    },

    get: core.get,
    create: core.create,
    update: core.update,
    remove: core.remove,
    upsertByName: core.upsertByName,
  };
}
