// Stand-in for the single log writer (log-writer.ts, issue 9 deliverable 5) until it lands on
// this branch: the same LogWriter contract with fewer properties. It redacts through the
// conversation's registry (split secrets included), persists in small batches fenced by the
// lease epoch, advances the turn's raw byte counters in the same transaction, and notifies the
// feed. It does not enforce LOG_OUTPUT_BUDGET_MB, and it counts bytes the redactor still holds
// back as persisted (at most the longest secret form), which the real writer does exactly.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import {
  type Feed,
  type LogWriter,
  type LogWriterFactory,
  type OwnerLease,
  StaleOwnerError,
} from './contracts.ts';
import type { SecretRegistry, StreamRedactor } from './redactor.ts';

const BATCH_MS = 20;

export function createBasicLogWriters(deps: { db: Db; feed: Feed }): LogWriterFactory {
  return { create: (input) => createBasicLogWriter(deps, input.lease, input.registry) };
}

function createBasicLogWriter(
  deps: { db: Db; feed: Feed },
  lease: OwnerLease,
  registry: SecretRegistry,
): LogWriter {
  const redactors = new Map<string, StreamRedactor>();
  let rows: { stream: 'stdout' | 'stderr'; turnId: string | null; data: Buffer[] }[] = [];
  let raw = new Map<string, { stdout: number; stderr: number }>();
  let timer: NodeJS.Timeout | null = null;
  let chain: Promise<void> = Promise.resolve();
  let closed = false;
  let fail: (err: Error) => void = () => {};
  const failed = new Promise<Error>((resolve) => {
    fail = resolve;
  });

  const key = (stream: string, turnId: string | null) => `${stream}:${turnId ?? ''}`;

  const append = (stream: 'stdout' | 'stderr', turnId: string | null, data: Buffer) => {
    if (data.length === 0) return;
    const last = rows.at(-1);
    if (last && last.stream === stream && last.turnId === turnId) last.data.push(Buffer.from(data));
    else rows.push({ stream, turnId, data: [Buffer.from(data)] });
  };

  const persist = async () => {
    const batch = rows;
    const counts = raw;
    rows = [];
    raw = new Map();
    if (batch.length === 0 && counts.size === 0) return;
    const bytes = batch.reduce((n, r) => n + r.data.reduce((m, d) => m + d.length, 0), 0);
    const lastId = await deps.db.transaction().execute(async (trx) => {
      const fenced = await trx
        .updateTable('conversations')
        .set({ log_bytes: sql`log_bytes + ${bytes}` })
        .where('id', '=', lease.conversationId)
        .where('owner_epoch', '=', lease.epoch)
        .returning('id')
        .executeTakeFirst();
      if (!fenced) throw new StaleOwnerError(lease.conversationId);
      for (const [turnId, c] of counts) {
        await trx
          .updateTable('turns')
          .set({
            stdout_raw_bytes: sql`stdout_raw_bytes + ${c.stdout}`,
            stderr_raw_bytes: sql`stderr_raw_bytes + ${c.stderr}`,
          })
          .where('id', '=', turnId)
          .execute();
      }
      if (batch.length === 0) return null;
      const inserted = await trx
        .insertInto('log_events')
        .values(
          batch.map((r) => ({
            tenant_id: lease.tenantId,
            conversation_id: lease.conversationId,
            turn_id: r.turnId,
            stream: r.stream,
            data: Buffer.concat(r.data),
          })),
        )
        .returning('id')
        .execute();
      return inserted.at(-1)?.id ?? null;
    });
    if (lastId !== null) deps.feed.publish(lease.conversationId, { type: 'events', lastId: String(lastId) });
  };

  const enqueue = (work: () => Promise<void>): Promise<void> => {
    chain = chain.then(work).catch((err: Error) => {
      fail(err);
      throw err;
    });
    const result = chain;
    chain = chain.catch(() => {});
    return result;
  };

  const schedule = () => {
    timer ??= setTimeout(() => {
      timer = null;
      void enqueue(persist).catch(() => {});
    }, BATCH_MS);
  };

  const drainRedactors = () => {
    for (const [k, r] of redactors) {
      const [stream, turnId] = k.split(':') as ['stdout' | 'stderr', string];
      append(stream, turnId || null, r.flush());
    }
  };

  const flush = async () => {
    if (timer) clearTimeout(timer);
    timer = null;
    drainRedactors();
    await enqueue(persist);
  };

  return {
    output(stream, chunk, turnId) {
      if (closed) throw new Error('log writer is closed');
      const k = key(stream, turnId ?? null);
      let r = redactors.get(k);
      if (!r) {
        r = registry.stream();
        redactors.set(k, r);
      }
      append(stream, turnId ?? null, r.write(chunk));
      if (turnId) {
        const c = raw.get(turnId) ?? { stdout: 0, stderr: 0 };
        c[stream] += chunk.length;
        raw.set(turnId, c);
      }
      schedule();
    },
    async stage(event) {
      await flush();
      await enqueue(async () => {
        const row = await deps.db
          .insertInto('log_events')
          .columns([
            'tenant_id',
            'conversation_id',
            'turn_id',
            'stream',
            'stage',
            'state',
            'duration_ms',
            'message',
          ])
          .expression(
            deps.db
              .selectNoFrom([
                sql<string>`${lease.tenantId}::uuid`.as('tenant_id'),
                sql<string>`${lease.conversationId}::uuid`.as('conversation_id'),
                sql<string | null>`${event.turnId ?? null}::uuid`.as('turn_id'),
                sql<string>`'stage'`.as('stream'),
                sql<string>`${event.stage}`.as('stage'),
                sql<string>`${event.state}`.as('state'),
                sql<
                  number | null
                >`${event.durationMs === undefined ? null : Math.round(event.durationMs)}::int`.as(
                  'duration_ms',
                ),
                sql<
                  string | null
                >`${event.message ? registry.redact(event.message).toString('utf8') : null}`.as('message'),
              ])
              .where(
                sql<boolean>`EXISTS (SELECT 1 FROM conversations WHERE id = ${lease.conversationId} AND owner_epoch = ${lease.epoch})`,
              ),
          )
          .returning('id')
          .executeTakeFirst();
        if (!row) throw new StaleOwnerError(lease.conversationId);
        deps.feed.publish(lease.conversationId, { type: 'events', lastId: String(row.id) });
      });
    },
    flush,
    async close() {
      if (closed) return;
      await flush().finally(() => {
        closed = true;
      });
    },
    failed,
  };
}
