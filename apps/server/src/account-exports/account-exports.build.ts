// The `build_account_export` job: streams an account's export document through gzip into
// PostgreSQL as bytea chunks (in a worker thread, account-exports.worker.ts), then marks it
// ready and asks for the "export ready" mail. What must hold (test/account-exports.http.test.ts,
// scripts/bench-export.ts):
// - Memory stays flat whatever the account holds: the writer runs in a thread with its own heap
//   of WRITER_LIMITS, so the rows it reads and the garbage they leave are collected there, within
//   that bound, and never grow the server's heap.
// - Idempotent: a job run twice, or again after a crash mid-build, drops the chunks of the
//   earlier run and builds anew (claimExport); an export that is ready, failed or gone is
//   left alone.
// - A failed build leaves the export `failed` with a reason that names no row content, and
//   no chunk; the account may ask again (within the rate limit).
// - Exports run one at a time across the cluster (the job queue EXPORT_QUEUE), so the other
//   job slot stays free for mail, and one writer thread at most runs per server.
import { Worker } from 'node:worker_threads';
import type { Task } from 'graphile-worker';
import type pg from 'pg';
import { z } from 'zod';
import type { ExportService } from '../apply/export.service.ts';
import type { Db } from '../db/database.ts';
import type { MailQueue } from '../mail/mail.queue.ts';
import type { Logger } from '../observability/logger.ts';
import { claimExport, markFailed, markReady } from './account-exports.repo.ts';
import { WRITER_ROLE, type WriterInput, type WriterResult } from './account-exports.worker.ts';

export { CHUNK_BYTES } from './account-exports.worker.ts';

export const BUILD_EXPORT_TASK = 'build_account_export';
/** graphile-worker queue: jobs of one queue run one after another. */
export const EXPORT_QUEUE = 'account_exports';
/** How long a ready export can be downloaded (docs/data-export.md). */
export const EXPORT_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/**
 * The writer thread's heap (MiB): room for a page of the largest rows (100 log rows of 32 KiB,
 * or one 5 MiB image, as JSON) several times over; V8 collects within it. Smaller old
 * generations (64 MiB) measured 6× slower builds: V8 then collects all the time
 * (scripts/bench-export.ts, docs/performance.md).
 */
export const WRITER_LIMITS = { maxOldGenerationSizeMb: 128, maxYoungGenerationSizeMb: 16 };

const Payload = z.object({ exportId: z.uuid() });
const WRITER = new URL('./account-exports.worker.ts', import.meta.url);

/** Runs the writer thread to its one answer; a thread that dies (out of memory) is a failure. */
function runWriter(input: WriterInput): Promise<WriterResult> {
  return new Promise((resolve) => {
    let answered: WriterResult | undefined;
    const worker = new Worker(WRITER, { workerData: input, resourceLimits: WRITER_LIMITS, execArgv: [] });
    worker.once('message', (result: WriterResult) => {
      answered = result;
    });
    worker.once('error', (err) => {
      answered ??= { ok: false, reason: err.message };
    });
    worker.once('exit', (code) => {
      resolve(answered ?? { ok: false, reason: `the export writer exited with code ${code}` });
    });
  });
}

export function createBuildExportTask(deps: {
  db: Db;
  /** How the writer thread connects (database.ts poolOptions: its own connection). */
  pool: pg.PoolConfig & { connectionString: string };
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
    // Environments, vaults and agents are bounded per account: listed here, as apply exports them.
    const { documents } = await deps.exporter.export({
      tenantId: row.tenant_id,
      actor: { kind: 'system', userId: null, apiKeyId: null },
      ip: null,
    });
    const result = await runWriter({
      role: WRITER_ROLE,
      pool: deps.pool,
      exportId,
      tenantId: row.tenant_id,
      manifests: documents,
      now: new Date().toISOString(),
    });
    if (!result.ok) {
      log.error({ exportId, tenantId: row.tenant_id, reason: result.reason }, 'account export failed');
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
      if (!(await markReady(trx, exportId, result.bytes, expiresAt))) return;
      await deps.mailQueue.enqueue(trx, { kind: 'export_ready', userId: row.tenant_id, exportId });
    });
    log.info(
      { exportId, tenantId: row.tenant_id, bytes: result.bytes, ms: Date.now() - started },
      'account export ready',
    );
  };
}
