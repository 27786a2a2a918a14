// Agents: CRUD with list filters, the environment reference and the vault allowlist, and the
// upsert-by-name used by bulk apply. A referenced environment or vault must belong to the
// caller's tenant; a foreign id answers exactly like a missing one (404).
import { v7 as uuidv7 } from 'uuid';
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { findEnvironment } from '../environments/environments.repo.ts';
import type { UpsertAction } from '../environments/environments.service.ts';
import { AppError } from '../http/errors.ts';
import {
  canonicalJson,
  isForeignKeyViolation,
  isUniqueViolation,
  type ResourceContext,
} from '../secrets/context.ts';
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

const NAME_CONSTRAINT = 'agents_tenant_id_name_key';

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
  const view = async (conn: Db, tenantId: string, row: AgentRow) => (await views(conn, tenantId, [row]))[0]!;

  const find = async (conn: Db, tenantId: string, id: string): Promise<AgentRow> => {
    const row = isUuid(id) ? await findAgent(conn, tenantId, id) : undefined;
    if (!row) throw AppError.notFound('agent');
    return row;
  };

  /** Both references must exist in the caller's tenant. */
  const checkReferences = async (conn: Db, tenantId: string, input: AgentInput): Promise<void> => {
    if (input.environment_id && !(await findEnvironment(conn, tenantId, input.environment_id))) {
      throw AppError.notFound('environment');
    }
    const found = await findVaultsByIds(conn, tenantId, input.vault_ids);
    if (found.length !== input.vault_ids.length) throw AppError.notFound('vault');
  };

  const record = (conn: Db, ctx: ResourceContext, type: string, row: { id: string; name: string }) =>
    audit.record(
      {
        type,
        tenantId: ctx.tenantId,
        actor: ctx.actor,
        ip: ctx.ip,
        metadata: { agent_id: row.id, name: row.name },
      },
      conn,
    );

  const insert = async (conn: Db, ctx: ResourceContext, input: AgentInput) => {
    await checkReferences(conn, ctx.tenantId, input);
    const row = await insertAgent(conn, ctx.tenantId, uuidv7(), input);
    await replaceAgentVaults(conn, ctx.tenantId, row.id, input.vault_ids);
    await record(conn, ctx, 'agent.created', row);
    return row;
  };

  const update = async (conn: Db, ctx: ResourceContext, id: string, input: AgentInput) => {
    await checkReferences(conn, ctx.tenantId, input);
    const row = await updateAgent(conn, ctx.tenantId, id, input);
    if (!row) throw AppError.notFound('agent');
    await replaceAgentVaults(conn, ctx.tenantId, row.id, input.vault_ids);
    await record(conn, ctx, 'agent.updated', row);
    return row;
  };

  const mapErrors = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (isUniqueViolation(err, NAME_CONSTRAINT)) {
        throw new AppError('conflict', 'an agent with this name already exists', {
          extra: { errors: { name: ['is already taken'] } },
        });
      }
      // A referenced environment or vault deleted between the check and the write.
      if (isForeignKeyViolation(err)) throw AppError.notFound('environment or vault');
      throw err;
    }
  };

  return {
    async list(ctx, filters) {
      if (filters.environmentId !== undefined && !isUuid(filters.environmentId)) return [];
      return await views(db, ctx.tenantId, await listAgents(db, ctx.tenantId, filters));
    },

    async get(ctx, id) {
      return await view(db, ctx.tenantId, await find(db, ctx.tenantId, id));
    },

    async create(ctx, input) {
      const n = normalized(input);
      return await mapErrors(() =>
        db.transaction().execute(async (trx) => view(trx, ctx.tenantId, await insert(trx, ctx, n))),
      );
    },

    async update(ctx, id, input) {
      const n = normalized(input);
      return await mapErrors(() =>
        db.transaction().execute(async (trx) => {
          await find(trx, ctx.tenantId, id);
          return await view(trx, ctx.tenantId, await update(trx, ctx, id, n));
        }),
      );
    },

    async remove(ctx, id) {
      await db.transaction().execute(async (trx) => {
        const row = await find(trx, ctx.tenantId, id);
        await deleteAgent(trx, ctx.tenantId, id);
        await record(trx, ctx, 'agent.deleted', row);
      });
    },

    async upsertByName(ctx, input, trx) {
      const n = normalized(input);
      const existing = await findAgentByName(trx, ctx.tenantId, n.name);
      if (!existing) return { id: (await insert(trx, ctx, n)).id, action: 'created' };
      const vaults = (await vaultIdsByAgent(trx, ctx.tenantId, [existing.id])).get(existing.id) ?? [];
      if (canonicalJson(mutable(existing, vaults)) === canonicalJson(n)) {
        return { id: existing.id, action: 'unchanged' };
      }
      await update(trx, ctx, existing.id, n);
      return { id: existing.id, action: 'updated' };
    },
  };
}
