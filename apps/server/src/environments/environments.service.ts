// Environments: CRUD, read counts, and the upsert-by-name used by bulk apply.
// Tenant scoping: every lookup goes through the repo with the caller's tenant id; a
// malformed or foreign id is "not found".
import { v7 as uuidv7 } from 'uuid';
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import {
  canonicalJson,
  isForeignKeyViolation,
  isUniqueViolation,
  type ResourceContext,
} from '../secrets/context.ts';
import { isUuid } from '../secrets/fields.ts';
import { createOwnedSecrets, type OwnedSecrets } from '../secrets/owned-secrets.ts';
import type { SecretsService } from '../secrets/secrets.service.ts';
import {
  countAgentsByEnvironment,
  deleteEnvironment,
  type EnvironmentRow,
  findEnvironment,
  findEnvironmentByName,
  findEnvironmentWithCounts,
  insertEnvironment,
  listEnvironmentsWithCounts,
  updateEnvironment,
} from './environments.repo.ts';
import type { EnvironmentInput, EnvironmentViewT } from './environments.schema.ts';

export type UpsertAction = 'created' | 'updated' | 'unchanged';

export interface EnvironmentsService {
  list(ctx: ResourceContext): Promise<EnvironmentViewT[]>;
  get(ctx: ResourceContext, id: string): Promise<EnvironmentViewT>;
  create(ctx: ResourceContext, input: EnvironmentInput): Promise<EnvironmentViewT>;
  update(ctx: ResourceContext, id: string, input: EnvironmentInput): Promise<EnvironmentViewT>;
  remove(ctx: ResourceContext, id: string): Promise<void>;
  /** Bulk apply: create or update by name inside the caller's transaction. */
  upsertByName(
    ctx: ResourceContext,
    input: EnvironmentInput,
    trx: Db,
  ): Promise<{ id: string; action: UpsertAction }>;
  secrets: OwnedSecrets;
}

const NAME_CONSTRAINT = 'environments_tenant_id_name_key';

function mutable(row: EnvironmentRow): EnvironmentInput {
  return {
    name: row.name,
    env_vars: row.env_vars,
    packages: row.packages,
    repos: row.repos,
    setup_script: row.setup_script,
    networking_type: row.networking_type,
    networking_config: row.networking_config,
    metadata: row.metadata,
  };
}

export function sameEnvironment(row: EnvironmentRow, input: EnvironmentInput): boolean {
  return canonicalJson(mutable(row)) === canonicalJson(input);
}

function nameTaken(): AppError {
  return new AppError('conflict', 'an environment with this name already exists', {
    extra: { errors: { name: ['is already taken'] } },
  });
}

export function createEnvironmentsService(deps: {
  db: Db;
  secrets: SecretsService;
  audit: Pick<AuditService, 'record'>;
}): EnvironmentsService {
  const { db, audit } = deps;

  const present = (
    r: EnvironmentRow,
    counts: { agent_count: number | null; secret_count: number | null },
  ) => ({
    ...mutable(r),
    id: r.id,
    checkpoint_id: r.checkpoint_id,
    agent_count: Number(counts.agent_count ?? 0),
    secret_count: Number(counts.secret_count ?? 0),
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  });

  const views = async (conn: Db, tenantId: string, rows: EnvironmentRow[]): Promise<EnvironmentViewT[]> => {
    const ids = rows.map((r) => r.id);
    const [agents, secrets] = await Promise.all([
      countAgentsByEnvironment(conn, tenantId, ids),
      deps.secrets.count(tenantId, 'environment', ids, conn),
    ]);
    return rows.map((r) =>
      present(r, { agent_count: agents.get(r.id) ?? 0, secret_count: secrets.get(r.id) ?? 0 }),
    );
  };
  const view = async (conn: Db, tenantId: string, row: EnvironmentRow) =>
    (await views(conn, tenantId, [row]))[0]!;

  const find = async (conn: Db, tenantId: string, id: string): Promise<EnvironmentRow> => {
    const row = isUuid(id) ? await findEnvironment(conn, tenantId, id) : undefined;
    if (!row) throw AppError.notFound('environment');
    return row;
  };

  const record = (conn: Db, ctx: ResourceContext, type: string, row: { id: string; name: string }) =>
    audit.record(
      {
        type,
        tenantId: ctx.tenantId,
        actor: ctx.actor,
        ip: ctx.ip,
        metadata: { environment_id: row.id, name: row.name },
      },
      conn,
    );

  const insert = async (conn: Db, ctx: ResourceContext, input: EnvironmentInput) => {
    await deps.secrets.ensureTenantKey(ctx.tenantId, conn);
    const row = await insertEnvironment(conn, ctx.tenantId, uuidv7(), input);
    await record(conn, ctx, 'environment.created', row);
    return row;
  };

  const update = async (conn: Db, ctx: ResourceContext, id: string, input: EnvironmentInput) => {
    const row = await updateEnvironment(conn, ctx.tenantId, id, input);
    if (!row) throw AppError.notFound('environment');
    await record(conn, ctx, 'environment.updated', row);
    return row;
  };

  const mapErrors = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (isUniqueViolation(err, NAME_CONSTRAINT)) throw nameTaken();
      throw err;
    }
  };

  return {
    async list(ctx) {
      return (await listEnvironmentsWithCounts(db, ctx.tenantId)).map((r) => present(r, r));
    },

    async get(ctx, id) {
      const row = isUuid(id) ? await findEnvironmentWithCounts(db, ctx.tenantId, id) : undefined;
      if (!row) throw AppError.notFound('environment');
      return present(row, row);
    },

    async create(ctx, input) {
      return await mapErrors(() =>
        db.transaction().execute(async (trx) => view(trx, ctx.tenantId, await insert(trx, ctx, input))),
      );
    },

    async update(ctx, id, input) {
      return await mapErrors(() =>
        db.transaction().execute(async (trx) => {
          await find(trx, ctx.tenantId, id);
          return await view(trx, ctx.tenantId, await update(trx, ctx, id, input));
        }),
      );
    },

    async remove(ctx, id) {
      try {
        await db.transaction().execute(async (trx) => {
          const row = await find(trx, ctx.tenantId, id);
          const agents = (await countAgentsByEnvironment(trx, ctx.tenantId, [id])).get(id) ?? 0;
          if (agents > 0) throw inUse(agents);
          await deleteEnvironment(trx, ctx.tenantId, id);
          await record(trx, ctx, 'environment.deleted', row);
        });
      } catch (err) {
        // An agent attached between the check and the delete: the foreign key refuses it.
        if (isForeignKeyViolation(err)) throw inUse(1);
        throw err;
      }
    },

    async upsertByName(ctx, input, trx) {
      const existing = await findEnvironmentByName(trx, ctx.tenantId, input.name);
      if (!existing) return { id: (await insert(trx, ctx, input)).id, action: 'created' };
      if (sameEnvironment(existing, input)) return { id: existing.id, action: 'unchanged' };
      await update(trx, ctx, existing.id, input);
      return { id: existing.id, action: 'updated' };
    },

    secrets: createOwnedSecrets({
      db,
      kind: 'environment',
      secrets: deps.secrets,
      audit,
      ownerExists: async (conn, tenantId, id) => !!(await findEnvironment(conn, tenantId, id)),
    }),
  };
}

function inUse(agents: number): AppError {
  return new AppError(
    'conflict',
    `the environment is used by ${agents} agent(s): detach or delete them first`,
    {
      extra: { agent_count: agents },
    },
  );
}
