// The writer of one account export, run in a worker thread (account-exports.build.ts starts it
// with its own small heap): the export document (account-exports.payload.ts) → gzip → bytea
// chunks of CHUNK_BYTES in account_export_chunks. What must hold:
// - Memory is bounded by the worker's resourceLimits, not by the account: the document is read
//   page by page, gzip pulls it with back-pressure, and at most one chunk waits for its INSERT.
//   A build that needs more fails (the thread runs out of memory) instead of growing the server.
// - It writes chunks only: the export row's status is the parent's, which also drops the chunks
//   of a failed or repeated build.
// - It answers with one message: `{ok: true, bytes}` or `{ok: false, reason}` (a reason names no
//   row content: database and stream errors only).
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parentPort, workerData } from 'node:worker_threads';
import { createGzip } from 'node:zlib';
import type pg from 'pg';
import type { ManifestDocument } from '../apply/export.service.ts';
import { type Db, openDatabase } from '../db/database.ts';
import { exportDocument } from './account-exports.payload.ts';
import { insertChunk } from './account-exports.repo.ts';

/** Bytes of gzip output per stored chunk. */
export const CHUNK_BYTES = 1024 * 1024;

/** Marks the workerData of a writer thread: only such a thread runs the writer on load. */
export const WRITER_ROLE = 'account-export-writer';

export interface WriterInput {
  role: typeof WRITER_ROLE;
  pool: pg.PoolConfig & { connectionString: string };
  exportId: string;
  tenantId: string;
  manifests: ManifestDocument[];
  /** ISO time the document says it was exported at. */
  now: string;
}

export type WriterResult = { ok: true; bytes: number } | { ok: false; reason: string };

/** A Writable that stores what it is given as numbered chunks of CHUNK_BYTES (the last shorter). */
function chunkSink(db: Db, exportId: string): { sink: Writable; bytes: () => number } {
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
  return { sink, bytes: () => total };
}

export async function writeExport(input: WriterInput): Promise<WriterResult> {
  const database = openDatabase({ ...input.pool, max: 1 });
  try {
    const { sink, bytes } = chunkSink(database.db, input.exportId);
    await pipeline(
      Readable.from(
        exportDocument({
          db: database.db,
          manifests: input.manifests,
          tenantId: input.tenantId,
          now: new Date(input.now),
        }),
      ),
      createGzip(),
      sink,
    );
    return { ok: true, bytes: bytes() };
  } catch (err) {
    return { ok: false, reason: err instanceof Error ? err.message : String(err) };
  } finally {
    await database.close();
  }
}

// The parent imports this module too (for its types and CHUNK_BYTES), as may any thread.
if (parentPort && (workerData as Partial<WriterInput> | null)?.role === WRITER_ROLE) {
  const port = parentPort;
  writeExport(workerData as WriterInput).then((result) => port.postMessage(result));
}
