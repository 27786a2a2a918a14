// Environments: CRUD, read counts, and the upsert-by-name used by bulk apply.
// Tenant scoping: every lookup goes through the repo with the caller's tenant id; a
// malformed or foreign id is "not found".
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { canonicalJson, isForeignKeyViolation, type ResourceContext } from '../resources/context.ts';
import { isUuid } from '../resources/fields.ts';
import { createNamedResource, type UpsertAction } from '../resources/named-resource.ts';
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

  const core = createNamedResource({
    db,
    audit,
    noun: 'environment',
    nameConstraint: 'environments_tenant_id_name_key',
    nameTaken: 'an environment with this name already exists',
    events: {
      created: 'environment.created',
      updated: 'environment.updated',
      deleted: 'environment.deleted',
      idKey: 'environment_id',
    },
    find: findEnvironment,
    findByName: findEnvironmentByName,
    insert: async (conn, tenantId, id, input: EnvironmentInput) => {
      await deps.secrets.ensureTenantKey(tenantId, conn);
      return await insertEnvironment(conn, tenantId, id, input);
    },
    update: updateEnvironment,
    delete: deleteEnvironment,
    beforeDelete: async (conn, tenantId, row) => {
      const agents = (await countAgentsByEnvironment(conn, tenantId, [row.id])).get(row.id) ?? 0;
      if (agents > 0) throw inUse(agents);
    },
    views,
    unchanged: (_conn, _tenantId, row, input) => sameEnvironment(row, input),
  });

  return {
    // The hot reads: the counts come in the same query (get is a prepared statement), not
    // from the core's find + views.
    async list(ctx) {
      return (await listEnvironmentsWithCounts(db, ctx.tenantId)).map((r) => present(r, r));
    },

    async get(ctx, id) {
      const row = isUuid(id) ? await findEnvironmentWithCounts(db, ctx.tenantId, id) : undefined;
      if (!row) throw AppError.notFound('environment');
      return present(row, row);
    },

    create: core.create,
    update: core.update,

    async remove(ctx, id) {
      try {
        await core.remove(ctx, id);
      } catch (err) {
        // An agent attached between the check and the delete: the foreign key refuses it.
        if (isForeignKeyViolation(err)) throw inUse(1);
        throw err;
      }
    },

    upsertByName: core.upsertByName,

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
