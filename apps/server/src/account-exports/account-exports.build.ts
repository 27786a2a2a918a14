// The `build_account_export` job: streams an account's export document through gzip into
// PostgreSQL as bytea chunks, then marks it ready and asks for the "export ready" mail.
// What must hold (test/account-exports.http.test.ts, scripts/bench-export.ts):
// - Memory stays flat whatever the account holds: the document is read page by page
//   (account-exports.payload.ts), gzip pulls it with back-pressure, and at most one chunk
//   (CHUNK_BYTES) waits before its INSERT.
// - Idempotent: a job run twice, or again after a crash mid-build, drops the chunks of the
//   earlier run and builds anew (claimExport); an export that is ready, failed or gone is
//   left alone.
// - A failed build leaves the export `failed` with a reason that names no row content, and
//   no chunk; the account may ask again (within the rate limit).
// - Exports run one at a time across the cluster (the job queue EXPORT_QUEUE), so the other
//   job slot stays free for mail.
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { ExportService } from '../apply/export.service.ts';
import type { Db } from '../db/database.ts';
import type { MailQueue } from '../mail/mail.queue.ts';
import type { Logger } from '../observability/logger.ts';
import { claimExport, insertChunk, markFailed, markReady } from './account-exports.repo.ts';
import { exportDocument } from './account-exports.payload.ts';

export const BUILD_EXPORT_TASK = 'build_account_export';
/** graphile-worker queue: jobs of one queue run one after another. */
export const EXPORT_QUEUE = 'account_exports';
/** How long a ready export can be downloaded (docs/data-export.md). */
export const EXPORT_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/** Bytes of gzip output per stored chunk. */
export const CHUNK_BYTES = 1024 * 1024;

const Payload = z.object({ exportId: z.uuid() });

/** A Writable that stores what it is given as numbered chunks of CHUNK_BYTES (the last shorter). */
function chunkSink(db: Db, exportId: string): { sink: Writable; size: () => number } {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let seq = 0;
  let total = 0;
  const flush = async () => {
    if (pendingBytes === 0) return;
    const data = Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    seq += 1;
    await insertChunk(db, exportId, seq, data);
  };
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      pending.push(chunk);
      pendingBytes += chunk.length;
      total += chunk.length;
      if (pendingBytes < CHUNK_BYTES) return callback();
      flush().then(() => callback(), callback);
    },
    final(callback) {
      flush().then(() => callback(), callback);
    },
  });
  return { sink, size: () => total };
}

export function createBuildExportTask(deps: {
  db: Db;
  exporter: ExportService;
  mailQueue: MailQueue;
  logger: Logger;
}): Task {
  const log = deps.logger.child({ component: 'account-exports' });
  return async (rawPayload) => {
    const parsed = Payload.safeParse(rawPayload);
    if (!parsed.success) {
      log.error('account export job with a malformed payload: dropped');
      return;
    }
    const { exportId } = parsed.data;
    const row = await claimExport(deps.db, exportId);
    if (!row) return;
    const started = Date.now();
    const { sink, size } = chunkSink(deps.db, exportId);
    try {
      await pipeline(
        Readable.from(
          exportDocument({ db: deps.db, exporter: deps.exporter, tenantId: row.tenant_id, now: new Date() }),
        ),
        createGzip(),
        sink,
      );
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      log.error({ exportId, tenantId: row.tenant_id, reason }, 'account export failed');
      await markFailed(
        deps.db,
        exportId,
        'the export could not be built; ask for a new one',
        new Date(Date.now() + EXPORT_TTL_MS),
      );
      return;
    }
    const expiresAt = new Date(Date.now() + EXPORT_TTL_MS);
    await deps.db.transaction().execute(async (trx) => {
      // The mail is queued with the state change: it exists exactly when the export is ready.
      if (!(await markReady(trx, exportId, size(), expiresAt))) return;
      await deps.mailQueue.enqueue(trx, { kind: 'export_ready', userId: row.tenant_id, exportId });
    });
    log.info(
      { exportId, tenantId: row.tenant_id, bytes: size(), ms: Date.now() - started },
      'account export ready',
    );
  };
}
