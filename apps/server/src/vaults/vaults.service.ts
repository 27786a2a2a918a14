// Vaults: CRUD, read counts, and the upsert-by-name used by bulk apply. Deleting a vault
// removes it from every agent's allowlist (documented in docs/resources.md).
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { canonicalJson, type ResourceContext } from '../resources/context.ts';
import { createNamedResource, type UpsertAction } from '../resources/named-resource.ts';
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

  const core = createNamedResource({
    db,
    audit,
    noun: 'vault',
    nameConstraint: 'vaults_tenant_id_name_key',
    nameTaken: 'a vault with this name already exists',
    events: {
      created: 'vault.created',
      updated: 'vault.updated',
      deleted: 'vault.deleted',
      idKey: 'vault_id',
    },
    find: findVault,
    findByName: findVaultByName,
    insert: async (conn, tenantId, id, input: VaultInput) => {
      await deps.secrets.ensureTenantKey(tenantId, conn);
      return await insertVault(conn, tenantId, id, input);
    },
    update: updateVault,
    delete: deleteVault,
    views,
    unchanged: (_conn, _tenantId, row, input) =>
      canonicalJson({ name: row.name, metadata: row.metadata }) === canonicalJson(input),
  });

  return {
    async list(ctx) {
      return await views(db, ctx.tenantId, await listVaults(db, ctx.tenantId));
    },

    get: core.get,
    create: core.create,
    update: core.update,
    remove: core.remove,
    upsertByName: core.upsertByName,

    secrets: createOwnedSecrets({
      db,
      kind: 'vault',
      secrets: deps.secrets,
      audit,
      ownerExists: async (conn, tenantId, id) => !!(await findVault(conn, tenantId, id)),
    }),
  };
}
