// Agents: CRUD with list filters, the environment reference and the vault allowlist, and the
// upsert-by-name used by bulk apply. A referenced environment or vault must belong to the
// caller's tenant; a foreign id answers exactly like a missing one (404).
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { findEnvironment } from '../environments/environments.repo.ts';
import { AppError } from '../http/errors.ts';
import { canonicalJson, isForeignKeyViolation, type ResourceContext } from '../resources/context.ts';
import { isUuid } from '../resources/fields.ts';
import { createNamedResource, type UpsertAction } from '../resources/named-resource.ts';
import { findVaultsByIds } from '../vaults/vaults.repo.ts';
import {
  type AgentFilters,
  type AgentRow,
  delegateIdsByAgent,
  deleteAgent,
  existingAgentIds,
  findAgent,
  findAgentByName,
  insertAgent,
  listAgents,
  replaceAgentDelegates,
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
    delegate_agent_ids: [...new Set(input.delegate_agent_ids.map((a) => a.toLowerCase()))].sort(),
  };
}

interface References {
  vaultIds: string[];
  delegateIds: string[];
}

function mutable(row: AgentRow, refs: References): AgentInput {
  return {
    name: row.name,
    model: row.model,
    runtime: row.runtime,
    environment_id: row.environment_id,
    vault_ids: [...refs.vaultIds].sort(),
    delegate_agent_ids: [...refs.delegateIds].sort(),
    system: row.system,
    description: row.description,
    skills: row.skills,
    mcp_servers: row.mcp_servers,
    metadata: row.metadata,
  };
}

export function createAgentsService(deps: { db: Db; audit: Pick<AuditService, 'record'> }): AgentsService {
  const { db, audit } = deps;

  const references = async (conn: Db, tenantId: string, ids: string[]) => {
    // One after the other: `conn` may be a transaction (one connection).
    const vaults = await vaultIdsByAgent(conn, tenantId, ids);
    const delegates = await delegateIdsByAgent(conn, tenantId, ids);
    return (id: string): References => ({
      vaultIds: vaults.get(id) ?? [],
      delegateIds: delegates.get(id) ?? [],
    });
  };

  const views = async (conn: Db, tenantId: string, rows: AgentRow[]): Promise<AgentViewT[]> => {
    const refs = await references(
      conn,
      tenantId,
      rows.map((r) => r.id),
    );
    return rows.map((r) => ({
      id: r.id,
      ...mutable(r, refs(r.id)),
      // Conversations do not exist yet; the count joins them once they do.
      conversation_count: 0,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    }));
  };

  /** Every reference (environment, vaults, delegated agents) must exist in the caller's tenant. */
  const checkReferences = async (conn: Db, tenantId: string, input: AgentInput): Promise<void> => {
    if (input.environment_id && !(await findEnvironment(conn, tenantId, input.environment_id))) {
      throw AppError.notFound('environment');
    }
    const found = await findVaultsByIds(conn, tenantId, input.vault_ids);
    if (found.length !== input.vault_ids.length) throw AppError.notFound('vault');
    const delegates = await existingAgentIds(conn, tenantId, input.delegate_agent_ids);
    if (delegates.length !== input.delegate_agent_ids.length) throw AppError.notFound('agent');
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
      await replaceAgentDelegates(conn, tenantId, row.id, input.delegate_agent_ids);
      return row;
    },
    update: async (conn, tenantId, id, input) => {
      await checkReferences(conn, tenantId, input);
      const row = await updateAgent(conn, tenantId, id, input);
      if (row) {
        await replaceAgentVaults(conn, tenantId, row.id, input.vault_ids);
        await replaceAgentDelegates(conn, tenantId, row.id, input.delegate_agent_ids);
      }
      return row;
    },
    delete: deleteAgent,
    views,
    unchanged: async (conn, tenantId, row, input) => {
      const refs = await references(conn, tenantId, [row.id]);
      return canonicalJson(mutable(row, refs(row.id))) === canonicalJson(input);
    },
    normalize: normalized,
    // A referenced environment, vault or agent deleted between the check and the write: the
    // request was valid when checked, so this is a conflict with a concurrent change (409),
    // not a missing reference (404, answered by checkReferences).
    mapError: (err) =>
      isForeignKeyViolation(err)
        ? new AppError(
            'conflict',
            'a referenced environment, vault or agent was deleted while the agent was being saved; try again',
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
