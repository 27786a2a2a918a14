// Data exports of the caller's account: ask for one, follow it, download it. What must hold
// (test/account-exports.http.test.ts):
// - One export at a time per account, and at most EXPORTS_PER_WINDOW asked for per rolling
//   EXPORT_WINDOW_MS; both checked under a per-account lock, the job enqueued in the same
//   transaction as the row (it exists exactly when the export does).
// - Another account's export id, or one that is not an id at all, is a missing one (404).
// - A download streams the stored chunks one at a time; only a ready export that has not
//   expired can be downloaded.
import { Readable } from 'node:stream';
import { v7 as uuidv7 } from 'uuid';
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { enqueueJob } from '../jobs/worker.ts';
import type { ResourceContext } from '../resources/context.ts';
import { isUuid } from '../resources/fields.ts';
import { BUILD_EXPORT_TASK, EXPORT_QUEUE } from './account-exports.build.ts';
import {
  activeExport,
  type ExportRow,
  exportsSince,
  findExport,
  insertExport,
  listExports,
  lockTenantExports,
  nextChunk,
} from './account-exports.repo.ts';

export const EXPORTS_PER_WINDOW = 3;
export const EXPORT_WINDOW_MS = 24 * 60 * 60 * 1000;
const LIST_LIMIT = 20;

export type ExportStatus = 'pending' | 'building' | 'ready' | 'failed' | 'expired';

export interface ExportView {
  id: string;
  status: ExportStatus;
  /** Bytes of the gzipped download, once ready. */
  size_bytes: number | null;
  failure_reason: string | null;
  created_at: string;
  completed_at: string | null;
  /** When the download goes away (ready or failed exports). */
  expires_at: string | null;
  /** Where a ready export is downloaded. */
  download_url: string | null;
}

export function toExportView(row: ExportRow, now: Date): ExportView {
  const expired = row.expires_at !== null && row.expires_at <= now;
  const status: ExportStatus = expired ? 'expired' : row.status;
  return {
    id: row.id,
    status,
    size_bytes: row.size_bytes === null ? null : Number(row.size_bytes),
    failure_reason: row.failure_reason,
    created_at: row.created_at.toISOString(),
    completed_at: row.completed_at?.toISOString() ?? null,
    expires_at: row.expires_at?.toISOString() ?? null,
    download_url: status === 'ready' ? `/api/account/exports/${row.id}/download` : null,
  };
}

export interface AccountExportsService {
  request(ctx: ResourceContext): Promise<ExportView>;
  get(ctx: ResourceContext, id: string): Promise<ExportView>;
  list(ctx: ResourceContext): Promise<ExportView[]>;
  /** A ready export's view and its gzipped bytes, read chunk by chunk as the stream is consumed. */
  download(ctx: ResourceContext, id: string): Promise<{ view: ExportView; body: Readable }>;
}

export function createAccountExportsService(deps: { db: Db; audit: AuditService }): AccountExportsService {
  const { db, audit } = deps;
  const find = async (ctx: ResourceContext, id: string): Promise<ExportRow> => {
    const row = isUuid(id) ? await findExport(db, ctx.tenantId, id) : undefined;
    if (!row) throw AppError.notFound('export');
    return row;
  };
  return {
    async request(ctx) {
      const row = await db.transaction().execute(async (trx) => {
        await lockTenantExports(trx, ctx.tenantId);
        const active = await activeExport(trx, ctx.tenantId);
        if (active) {
          throw new AppError('export_in_progress', 'an export of this account is already being built', {
            extra: { export_id: active.id },
          });
        }
        const now = new Date();
        const { count, oldest } = await exportsSince(
          trx,
          ctx.tenantId,
          new Date(now.getTime() - EXPORT_WINDOW_MS),
        );
        if (count >= EXPORTS_PER_WINDOW && oldest) {
          const seconds = Math.max(
            1,
            Math.ceil((oldest.getTime() + EXPORT_WINDOW_MS - now.getTime()) / 1000),
          );
          throw new AppError(
            'rate_limited',
            `at most ${EXPORTS_PER_WINDOW} exports per 24 hours; retry in ${seconds} s`,
            { headers: { 'retry-after': String(seconds) } },
          );
        }
        const created = await insertExport(trx, uuidv7(), ctx.tenantId);
        await enqueueJob(
          trx,
          BUILD_EXPORT_TASK,
          { exportId: created.id },
          { queueName: EXPORT_QUEUE, maxAttempts: 3 },
        );
        await audit.record(
          {
            type: 'account.export_requested',
            tenantId: ctx.tenantId,
            actor: ctx.actor,
            ip: ctx.ip,
            metadata: { export_id: created.id },
          },
          trx,
        );
        return created;
      });
      return toExportView(row, new Date());
    },

    async get(ctx, id) {
      return toExportView(await find(ctx, id), new Date());
    },

    async list(ctx) {
      const now = new Date();
      return (await listExports(db, ctx.tenantId, LIST_LIMIT)).map((r) => toExportView(r, now));
    },

    async download(ctx, id) {
      const view = toExportView(await find(ctx, id), new Date());
      if (view.status === 'expired')
        throw new AppError('export_expired', 'this export has expired; ask for a new one');
      if (view.status !== 'ready') {
        throw new AppError('export_not_ready', `this export is ${view.status}, not ready to download`);
      }
      await audit.record({
        type: 'account.export_downloaded',
        tenantId: ctx.tenantId,
        actor: ctx.actor,
        ip: ctx.ip,
        metadata: { export_id: view.id, size_bytes: view.size_bytes },
      });
      async function* chunks(): AsyncGenerator<Buffer> {
        let after = 0;
        for (;;) {
          const chunk = await nextChunk(db, view.id, after);
          if (!chunk) return;
          yield chunk.data;
          after = chunk.seq;
        }
      }
      return { view, body: Readable.from(chunks(), { objectMode: false }) };
    },
  };
}
