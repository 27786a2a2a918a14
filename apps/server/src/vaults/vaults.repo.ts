// SQL for vaults. Every method takes the tenant id first.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { VaultInput } from './vaults.schema.ts';

const COLUMNS = ['id', 'name', 'metadata', 'created_at', 'updated_at'] as const;

export type VaultRow = NonNullable<Awaited<ReturnType<typeof findVault>>>;

export async function findVault(db: Db, tenantId: string, id: string) {
  return await db
    .selectFrom('vaults')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findVaultByName(db: Db, tenantId: string, name: string) {
  return await db
    .selectFrom('vaults')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
}

export async function findVaultsByIds(db: Db, tenantId: string, ids: readonly string[]) {
  if (ids.length === 0) return [];
  return await db
    .selectFrom('vaults')
    .select(['id', 'name'])
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', ids)
    .execute();
}

export async function findVaultsByNames(db: Db, tenantId: string, names: readonly string[]) {
  if (names.length === 0) return [];
  return await db
    .selectFrom('vaults')
    .select(['id', 'name'])
    .where('tenant_id', '=', tenantId)
    .where('name', 'in', names)
    .execute();
}

export async function listVaults(db: Db, tenantId: string) {
  return await db
    .selectFrom('vaults')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .orderBy('name')
    .execute();
}

export async function insertVault(db: Db, tenantId: string, id: string, input: VaultInput) {
  return await db
    .insertInto('vaults')
    .values({ id, tenant_id: tenantId, name: input.name, metadata: JSON.stringify(input.metadata) })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function updateVault(db: Db, tenantId: string, id: string, input: VaultInput) {
  return await db
    .updateTable('vaults')
    .set({ name: input.name, metadata: JSON.stringify(input.metadata), updated_at: sql<Date>`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning(COLUMNS)
    .executeTakeFirst();
}

export async function deleteVault(db: Db, tenantId: string, id: string): Promise<boolean> {
  const res = await db
    .deleteFrom('vaults')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

export async function countAgentsByVault(
  db: Db,
  tenantId: string,
  vaultIds: readonly string[],
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (vaultIds.length === 0) return out;
  const rows = await db
    .selectFrom('agent_vaults')
    .select(['vault_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('tenant_id', '=', tenantId)
    .where('vault_id', 'in', vaultIds)
    .groupBy('vault_id')
    .execute();
  for (const r of rows) out.set(r.vault_id, Number(r.n));
  return out;
}
