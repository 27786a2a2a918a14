// SQL for tenant data keys and secrets. Every tenant-scoped method takes the tenant id first.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

export type SecretOwner = { kind: 'environment' | 'vault'; id: string };

export interface SecretRow {
  id: string;
  key: string;
  ciphertext: Buffer;
  value_mac: Buffer;
  created_at: Date;
  updated_at: Date;
}

export interface TenantKeyRow {
  tenant_id: string;
  wrapped_key: Buffer;
  key_version: string;
}

const ownerColumn = (owner: SecretOwner) => (owner.kind === 'environment' ? 'environment_id' : 'vault_id');

export async function insertTenantKeyIfMissing(
  db: Db,
  tenantId: string,
  wrappedKey: Buffer,
  keyVersion: string,
): Promise<void> {
  await db
    .insertInto('tenant_keys')
    .values({ tenant_id: tenantId, wrapped_key: wrappedKey, key_version: keyVersion })
    .onConflict((oc) => oc.column('tenant_id').doNothing())
    .execute();
}

export async function findTenantKey(
  db: Db,
  tenantId: string,
  forUpdate = false,
): Promise<TenantKeyRow | undefined> {
  let q = db
    .selectFrom('tenant_keys')
    .select(['tenant_id', 'wrapped_key', 'key_version'])
    .where('tenant_id', '=', tenantId);
  if (forUpdate) q = q.forUpdate();
  return await q.executeTakeFirst();
}

export async function updateTenantKey(
  db: Db,
  tenantId: string,
  wrappedKey: Buffer,
  keyVersion: string,
): Promise<void> {
  await db
    .updateTable('tenant_keys')
    .set({ wrapped_key: wrappedKey, key_version: keyVersion, updated_at: sql<Date>`now()` })
    .where('tenant_id', '=', tenantId)
    .execute();
}

/** Tenant ids whose key is not wrapped by `currentVersion`, after `afterTenantId`, in id order. */
export async function listStaleTenantKeys(
  db: Db,
  currentVersion: string,
  afterTenantId: string | null,
  limit: number,
): Promise<string[]> {
  let q = db
    .selectFrom('tenant_keys')
    .select('tenant_id')
    .where('key_version', '<>', currentVersion)
    .orderBy('tenant_id')
    .limit(limit);
  if (afterTenantId) q = q.where('tenant_id', '>', afterTenantId);
  return (await q.execute()).map((r) => r.tenant_id);
}

/** Tenant keys after `afterTenantId`, in id order (the verify-secrets walk; read only). */
export async function listTenantKeys(
  db: Db,
  afterTenantId: string | null,
  limit: number,
): Promise<TenantKeyRow[]> {
  let q = db
    .selectFrom('tenant_keys')
    .select(['tenant_id', 'wrapped_key', 'key_version'])
    .orderBy('tenant_id')
    .limit(limit);
  if (afterTenantId) q = q.where('tenant_id', '>', afterTenantId);
  return await q.execute();
}

/** Every secret of one tenant, environment and vault alike, with its owner. */
export async function listTenantSecrets(
  db: Db,
  tenantId: string,
): Promise<{ key: string; environment_id: string | null; vault_id: string | null; ciphertext: Buffer }[]> {
  return await db
    .selectFrom('secrets')
    .select(['key', 'environment_id', 'vault_id', 'ciphertext'])
    .where('tenant_id', '=', tenantId)
    .orderBy('id')
    .execute();
}

export async function listSecrets(db: Db, tenantId: string, owner: SecretOwner): Promise<SecretRow[]> {
  return await db
    .selectFrom('secrets')
    .select(['id', 'key', 'ciphertext', 'value_mac', 'created_at', 'updated_at'])
    .where('tenant_id', '=', tenantId)
    .where(ownerColumn(owner), '=', owner.id)
    .orderBy('key')
    .execute();
}

export async function findSecret(
  db: Db,
  tenantId: string,
  owner: SecretOwner,
  key: string,
): Promise<SecretRow | undefined> {
  return await db
    .selectFrom('secrets')
    .select(['id', 'key', 'ciphertext', 'value_mac', 'created_at', 'updated_at'])
    .where('tenant_id', '=', tenantId)
    .where(ownerColumn(owner), '=', owner.id)
    .where('key', '=', key)
    .executeTakeFirst();
}

export async function upsertSecret(
  db: Db,
  tenantId: string,
  owner: SecretOwner,
  row: { id: string; key: string; ciphertext: Buffer; value_mac: Buffer },
): Promise<{ row: Omit<SecretRow, 'ciphertext' | 'value_mac'>; inserted: boolean }> {
  const column = ownerColumn(owner);
  const result = await db
    .insertInto('secrets')
    .values({
      id: row.id,
      tenant_id: tenantId,
      environment_id: owner.kind === 'environment' ? owner.id : null,
      vault_id: owner.kind === 'vault' ? owner.id : null,
      key: row.key,
      ciphertext: row.ciphertext,
      value_mac: row.value_mac,
    })
    .onConflict((oc) =>
      oc
        .columns([column, 'key'])
        .where(column, 'is not', null)
        .doUpdateSet({
          ciphertext: row.ciphertext,
          value_mac: row.value_mac,
          updated_at: sql<Date>`now()`,
        })
        // The conflicting row must belong to the same tenant (it always does: owner ids are
        // tenant-scoped and checked by the caller); this keeps the statement tenant-safe anyway.
        .where('secrets.tenant_id', '=', tenantId),
    )
    .returning(['id', 'key', 'created_at', 'updated_at', sql<boolean>`(xmax = 0)`.as('inserted')])
    .executeTakeFirstOrThrow();
  const { inserted, ...rest } = result;
  return { row: rest, inserted };
}

export async function deleteSecret(
  db: Db,
  tenantId: string,
  owner: SecretOwner,
  key: string,
): Promise<boolean> {
  const res = await db
    .deleteFrom('secrets')
    .where('tenant_id', '=', tenantId)
    .where(ownerColumn(owner), '=', owner.id)
    .where('key', '=', key)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

export async function countSecrets(
  db: Db,
  tenantId: string,
  kind: SecretOwner['kind'],
  ownerIds: readonly string[],
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (ownerIds.length === 0) return out;
  const column = kind === 'environment' ? 'environment_id' : 'vault_id';
  const rows = await db
    .selectFrom('secrets')
    .select([column, (eb) => eb.fn.countAll<number>().as('n')])
    .where('tenant_id', '=', tenantId)
    .where(column, 'in', ownerIds)
    .groupBy(column)
    .execute();
  for (const r of rows) {
    const id = (r as Record<string, unknown>)[column];
    if (typeof id === 'string') out.set(id, Number(r.n));
  }
  return out;
}
