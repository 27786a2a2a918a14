// SQL for inference credentials. Every method takes the tenant id first.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { InferenceProvider } from './providers.ts';

export interface CredentialMetaRow {
  provider: InferenceProvider;
  base_url: string | null;
  updated_at: Date;
}

export interface CredentialRow extends CredentialMetaRow {
  ciphertext: Buffer;
}

export async function listCredentialMeta(db: Db, tenantId: string): Promise<CredentialMetaRow[]> {
  return await db
    .selectFrom('inference_credentials')
    .select(['provider', 'base_url', 'updated_at'])
    .where('tenant_id', '=', tenantId)
    .execute();
}

export async function listCredentials(db: Db, tenantId: string): Promise<CredentialRow[]> {
  return await db
    .selectFrom('inference_credentials')
    .select(['provider', 'ciphertext', 'base_url', 'updated_at'])
    .where('tenant_id', '=', tenantId)
    .orderBy('provider')
    .execute();
}

export async function upsertCredential(
  db: Db,
  tenantId: string,
  row: { provider: InferenceProvider; ciphertext: Buffer; base_url: string | null },
): Promise<{ row: CredentialMetaRow; inserted: boolean }> {
  const result = await db
    .insertInto('inference_credentials')
    .values({ tenant_id: tenantId, ...row })
    .onConflict((oc) =>
      oc.columns(['tenant_id', 'provider']).doUpdateSet({
        ciphertext: row.ciphertext,
        base_url: row.base_url,
        updated_at: sql<Date>`now()`,
      }),
    )
    .returning(['provider', 'base_url', 'updated_at', sql<boolean>`(xmax = 0)`.as('inserted')])
    .executeTakeFirstOrThrow();
  const { inserted, ...rest } = result;
  return { row: rest, inserted };
}

export async function deleteCredential(
  db: Db,
  tenantId: string,
  provider: InferenceProvider,
): Promise<boolean> {
  const res = await db
    .deleteFrom('inference_credentials')
    .where('tenant_id', '=', tenantId)
    .where('provider', '=', provider)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}
