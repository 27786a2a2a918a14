// Vaults: CRUD, read counts, and the upsert-by-name used by bulk apply. Deleting a vault
// removes it from every agent's allowlist (documented in docs/resources.md).
import { v7 as uuidv7 } from 'uuid';
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import type { UpsertAction } from '../environments/environments.service.ts';
import { AppError } from '../http/errors.ts';
import { canonicalJson, isUniqueViolation, type ResourceContext } from '../secrets/context.ts';
import { isUuid } from '../secrets/fields.ts';
import { createOwnedSecrets, type OwnedSecrets } from '../secrets/owned-secrets.ts';
import type { SecretsService } from '../secrets/secrets.service.ts';
import {
  countAgentsByVault,
  deleteVault,
  findVault,
  findVaultByName,
  insertVault,
  listVaults,
  updateVault,
  type VaultRow,
} from './vaults.repo.ts';
import type { VaultInput, VaultViewT } from './vaults.schema.ts';

export interface VaultsService {
  list(ctx: ResourceContext): Promise<VaultViewT[]>;
  get(ctx: ResourceContext, id: string): Promise<VaultViewT>;
  create(ctx: ResourceContext, input: VaultInput): Promise<VaultViewT>;
  update(ctx: ResourceContext, id: string, input: VaultInput): Promise<VaultViewT>;
  remove(ctx: ResourceContext, id: string): Promise<void>;
  upsertByName(
    ctx: ResourceContext,
    input: VaultInput,
    trx: Db,
  ): Promise<{ id: string; action: UpsertAction }>;
  secrets: OwnedSecrets;
}

const NAME_CONSTRAINT = 'vaults_tenant_id_name_key';

export function createVaultsService(deps: {
  db: Db;
  secrets: SecretsService;
  audit: Pick<AuditService, 'record'>;
}): VaultsService {
  const { db, audit } = deps;

  const views = async (conn: Db, tenantId: string, rows: VaultRow[]): Promise<VaultViewT[]> => {
    const ids = rows.map((r) => r.id);
    const [secrets, agents] = await Promise.all([
      deps.secrets.count(tenantId, 'vault', ids, conn),
      countAgentsByVault(conn, tenantId, ids),
    ]);
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      metadata: r.metadata,
      secret_count: secrets.get(r.id) ?? 0,
      agent_count: agents.get(r.id) ?? 0,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    }));
  };
  const view = async (conn: Db, tenantId: string, row: VaultRow) => (await views(conn, tenantId, [row]))[0]!;

  const find = async (conn: Db, tenantId: string, id: string): Promise<VaultRow> => {
    const row = isUuid(id) ? await findVault(conn, tenantId, id) : undefined;
    if (!row) throw AppError.notFound('vault');
    return row;
  };

  const record = (conn: Db, ctx: ResourceContext, type: string, row: { id: string; name: string }) =>
    audit.record(
      {
        type,
        tenantId: ctx.tenantId,
        actor: ctx.actor,
        ip: ctx.ip,
        metadata: { vault_id: row.id, name: row.name },
      },
      conn,
    );

  const insert = async (conn: Db, ctx: ResourceContext, input: VaultInput) => {
    await deps.secrets.ensureTenantKey(ctx.tenantId, conn);
    const row = await insertVault(conn, ctx.tenantId, uuidv7(), input);
    await record(conn, ctx, 'vault.created', row);
    return row;
  };

  const update = async (conn: Db, ctx: ResourceContext, id: string, input: VaultInput) => {
    const row = await updateVault(conn, ctx.tenantId, id, input);
    if (!row) throw AppError.notFound('vault');
    await record(conn, ctx, 'vault.updated', row);
    return row;
  };

  const mapErrors = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (isUniqueViolation(err, NAME_CONSTRAINT)) {
        throw new AppError('conflict', 'a vault with this name already exists', {
          extra: { errors: { name: ['is already taken'] } },
        });
      }
      throw err;
    }
  };

  return {
    async list(ctx) {
      return await views(db, ctx.tenantId, await listVaults(db, ctx.tenantId));
    },

    async get(ctx, id) {
      return await view(db, ctx.tenantId, await find(db, ctx.tenantId, id));
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
      await db.transaction().execute(async (trx) => {
        const row = await find(trx, ctx.tenantId, id);
        await deleteVault(trx, ctx.tenantId, id);
        await record(trx, ctx, 'vault.deleted', row);
      });
    },

    async upsertByName(ctx, input, trx) {
      const existing = await findVaultByName(trx, ctx.tenantId, input.name);
      if (!existing) return { id: (await insert(trx, ctx, input)).id, action: 'created' };
      if (canonicalJson({ name: existing.name, metadata: existing.metadata }) === canonicalJson(input)) {
        return { id: existing.id, action: 'unchanged' };
      }
      await update(trx, ctx, existing.id, input);
      return { id: existing.id, action: 'updated' };
    },

    secrets: createOwnedSecrets({
      db,
      kind: 'vault',
      secrets: deps.secrets,
      audit,
      ownerExists: async (conn, tenantId, id) => !!(await findVault(conn, tenantId, id)),
    }),
  };
}
