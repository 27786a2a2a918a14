// All SQL of account exports: the export rows and their payload chunks. Every read and
// write of a row a caller names is scoped by tenant_id; the builder and the pruner act on
// rows by id, which they got from a scoped write or from the expiry index.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { AccountExportStatus } from './account-exports.tables.ts';

export interface ExportRow {
  id: string;
  tenant_id: string;
  status: AccountExportStatus;
  size_bytes: string | null;
  failure_reason: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  expires_at: Date | null;
}

const COLUMNS = [
  'id',
  'tenant_id',
  'status',
  'size_bytes',
  'failure_reason',
  'created_at',
  'started_at',
  'completed_at',
  'expires_at',
] as const;

/** Serializes the request checks of one account (the rate window and the one-at-a-time rule). */
export async function lockTenantExports(db: Db, tenantId: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${tenantId}::text, 28))`.execute(db);
}

/** Exports the account asked for since `since`, and the oldest of them (it leaves the window first). */
export async function exportsSince(
  db: Db,
  tenantId: string,
  since: Date,
): Promise<{ count: number; oldest: Date | null }> {
  const row = await db
    .selectFrom('account_exports')
    .select((eb) => [eb.fn.countAll<string>().as('count'), eb.fn.min('created_at').as('oldest')])
    .where('tenant_id', '=', tenantId)
    .where('created_at', '>', since)
    .executeTakeFirstOrThrow();
  return { count: Number(row.count), oldest: row.oldest ? new Date(row.oldest) : null };
}

export async function activeExport(db: Db, tenantId: string): Promise<ExportRow | undefined> {
  return await db
    .selectFrom('account_exports')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('status', 'in', ['pending', 'building'])
    .executeTakeFirst();
}

export async function insertExport(db: Db, id: string, tenantId: string): Promise<ExportRow> {
  return await db
    .insertInto('account_exports')
    .values({ id, tenant_id: tenantId })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function findExport(db: Db, tenantId: string, id: string): Promise<ExportRow | undefined> {
  return await db
    .selectFrom('account_exports')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function listExports(db: Db, tenantId: string, limit: number): Promise<ExportRow[]> {
  return await db
    .selectFrom('account_exports')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}

/**
 * Claims an export for building: pending, or building already (a run that crashed mid-way is
 * run again by the queue; its chunks are dropped and it starts over). Undefined when the export
 * is gone, finished or failed: the job then has nothing to do.
 */
export async function claimExport(db: Db, id: string): Promise<ExportRow | undefined> {
  return await db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('account_exports')
      .set({ status: 'building', started_at: sql<Date>`now()` })
      .where('id', '=', id)
      .where('status', 'in', ['pending', 'building'])
      .returning(COLUMNS)
      .executeTakeFirst();
    if (row) await trx.deleteFrom('account_export_chunks').where('export_id', '=', id).execute();
    return row;
  });
}

export async function insertChunk(db: Db, exportId: string, seq: number, data: Buffer): Promise<void> {
  await db.insertInto('account_export_chunks').values({ export_id: exportId, seq, data }).execute();
}

/** Marks a built export ready; false when it was deleted meanwhile (the account went). */
export async function markReady(db: Db, id: string, sizeBytes: number, expiresAt: Date): Promise<boolean> {
  const res = await db
    .updateTable('account_exports')
    .set({ status: 'ready', size_bytes: sizeBytes, completed_at: sql<Date>`now()`, expires_at: expiresAt })
    .where('id', '=', id)
    .where('status', '=', 'building')
    .executeTakeFirst();
  return res.numUpdatedRows > 0n;
}

/** A failed build keeps its row (the account sees why) and drops whatever it stored. */
export async function markFailed(db: Db, id: string, reason: string, expiresAt: Date): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('account_exports')
      .set({
        status: 'failed',
        failure_reason: reason,
        completed_at: sql<Date>`now()`,
        expires_at: expiresAt,
      })
      .where('id', '=', id)
      .execute();
    await trx.deleteFrom('account_export_chunks').where('export_id', '=', id).execute();
  });
}

/** The chunks of one export in order, `after` the last seq read (keyset: one chunk in memory). */
export async function nextChunk(
  db: Db,
  exportId: string,
  after: number,
): Promise<{ seq: number; data: Buffer } | undefined> {
  return await db
    .selectFrom('account_export_chunks')
    .select(['seq', 'data'])
    .where('export_id', '=', exportId)
    .where('seq', '>', after)
    .orderBy('seq')
    .limit(1)
    .executeTakeFirst();
}

/** Ids and sizes of exports whose expiry has passed at `now`, by id after `after` (keyset). */
export async function expiredExports(
  db: Db,
  now: Date,
  after: string | null,
  limit: number,
): Promise<Array<{ id: string; size_bytes: string | null }>> {
  let q = db
    .selectFrom('account_exports')
    .select(['id', 'size_bytes'])
    .where('expires_at', '<=', now)
    .orderBy('id')
    .limit(limit);
  if (after !== null) q = q.where('id', '>', after);
  return await q.execute();
}

/** Deletes exports by id that are still expired at `now` (their chunks go by cascade). */
export async function deleteExpired(db: Db, ids: readonly string[], now: Date): Promise<number> {
  if (ids.length === 0) return 0;
  const res = await db
    .deleteFrom('account_exports')
    .where('id', 'in', ids)
    .where('expires_at', '<=', now)
    .executeTakeFirst();
  return Number(res.numDeletedRows);
}
