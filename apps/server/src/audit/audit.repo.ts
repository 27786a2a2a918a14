// All SQL of the audit log. Tenant-scoped reads take the tenant id first.
import type { Db } from '../db/database.ts';
import type { AuditEventsTable } from './audit.tables.ts';

export interface NewAuditRow {
  id: string;
  tenant_id: string | null;
  type: string;
  actor_kind: AuditEventsTable['actor_kind'];
  actor_user_id: string | null;
  actor_api_key_id: string | null;
  ip: string | null;
  metadata: Record<string, unknown>;
}

export interface AuditRow extends NewAuditRow {
  created_at: Date;
}

export async function insertAuditEvent(db: Db, row: NewAuditRow): Promise<void> {
  await db
    .insertInto('audit_events')
    .values({ ...row, metadata: JSON.stringify(row.metadata) })
    .execute();
}

/** Newest first; `beforeId` is the last id of the previous page (UUIDv7 ids are time-ordered). */
export async function listAuditEvents(
  db: Db,
  tenantId: string,
  opts: { limit: number; beforeId?: string },
): Promise<AuditRow[]> {
  let q = db.selectFrom('audit_events').selectAll().where('tenant_id', '=', tenantId);
  if (opts.beforeId) q = q.where('id', '<', opts.beforeId);
  return await q.orderBy('id', 'desc').limit(opts.limit).execute();
}
