// The shared tail of a conversation log in one process: the viewers of a conversation that are
// caught up read its newest rows once per wake-up, formatted once, instead of one query and one
// JSON encoding per viewer (10 viewers cost one read, not ten).
//
// What must hold (tests in stream.routes.test.ts, "a viewer on another instance sees rows ...",
// "delivers a large backlog in order" and the benchmark's delivery check):
// 1. Contiguity: `entries` holds every row of the conversation with floor < id ≤ last, in id
//    order. Rows of one conversation commit in id order (one writer, one batch after another,
//    see log-writer.ts), so reading "after last" never skips a row that commits later.
// 2. Bounded: at most MAX_BYTES of frames are kept; dropping the oldest raises `floor`. A viewer
//    whose cursor is below `floor` reads from the database itself (stream.routes.ts).
// 3. The tail lives while a viewer holds it; the last release stops its feed subscription.
// 4. A frame is encoded once: the frames of the rows added together are encoded into one buffer,
//    and a page is views of such buffers (consecutive rows of one buffer: one view), never a copy;
//    the viewers woken by the same rows at the same cursor share one page (after() answers them
//    from a cache). N viewers cost N socket writes of the same bytes, not N JSON encodings, joins
//    and UTF-8 encodings (design/performance.md: log throughput to viewers).
// 5. Rows handed over by this process's log writer (FeedSignal.committed) are appended without a
//    read only when they directly follow the rows held (their `after` is `last`) and no read is
//    in flight; otherwise the tail reads the database as for any wake-up. One writer per
//    conversation (log-writer.ts, fenced by the owner epoch) makes `after` the row before them.
//    Tests in log-tail.test.ts: "appends the rows its process's writer committed without reading
//    them back" and "reads the database when handed rows that do not follow the ones it holds".
import type { Db } from '../../db/database.ts';
import type { Logger } from '../../observability/logger.ts';
import type { Feed } from '../contracts.ts';
import type { LogStream } from '../conversations.tables.ts';
import { type LogEventRow, listLogEvents } from './log-events.repo.ts';

/**
 * Frames kept per conversation with viewers (shared by all of them): eight of the log writer's
 * largest batches (2 MiB). A viewer that falls further behind reads the database itself, which
 * costs PostgreSQL and this process far more per byte than the tail; with 4 MiB, a burst of
 * output pushed slower viewers off the tail and the reads they then made slowed everyone
 * (npm run bench -- conversations-log: runs at 0.2× next to runs at 0.5×).
 */
const MAX_BYTES = 16 * 1024 * 1024;
const PAGE_ROWS = 128;

export interface TailEntry {
  id: bigint;
  stream: LogStream;
  /** The frames of the rows added with this one, UTF-8, in one buffer. */
  group: Buffer;
  /** Where the row's complete SSE frame is in `group`. */
  offset: number;
  length: number;
}

/** What a viewer writes next: one page (a single socket write). */
export interface TailPage {
  /** The frames of the rows after the cursor, in order (empty when the streams filter left none). */
  frames: readonly Buffer[];
  /** The id to resume after. */
  last: bigint;
  /** More rows wait after `last`. */
  more: boolean;
  /** The page holds a stage row (the owner reading it clears `unread`). */
  stage: boolean;
}

export interface LogTail {
  /** Every row with floor < id ≤ last is in the tail. */
  readonly floor: bigint;
  readonly last: bigint;
  /** Frames of the rows after `cursor` (cursor ≥ floor), up to about maxBytes; `last` is the id to resume after. */
  after(cursor: bigint, streams: readonly LogStream[] | null, maxBytes: number): TailPage;
  /** Reads the rows committed since `last` (single flight: concurrent callers share one read). */
  refresh(): Promise<void>;
  /** Called after new rows were added. */
  onRows(listener: () => void): () => void;
  release(): void;
}

export interface LogTails {
  acquire(tenantId: string, conversationId: string): Promise<LogTail>;
}

export function createLogTails(deps: {
  db: Db;
  feed: Feed;
  logger: Pick<Logger, 'warn'>;
  /** The row's SSE frame, whole or in parts written one after another (stream.routes.ts logEventFrameParts). */
  frame: (row: LogEventRow) => string | readonly string[];
}): LogTails {
  const tails = new Map<string, { tail: Promise<LogTail>; holders: number }>();

  const open = async (tenantId: string, conversationId: string): Promise<LogTail> => {
    const latest = await deps.db
      .selectFrom('log_events')
      .select((eb) => eb.fn.max('id').as('id'))
      .where('tenant_id', '=', tenantId)
      .where('conversation_id', '=', conversationId)
      .executeTakeFirst();
    let floor = BigInt(latest?.id ?? 0);
    let last = floor;
    let entries: TailEntry[] = [];
    let head = 0; // entries[head..] are live; older ones are dropped lazily
    let bytes = 0;
    let reading: Promise<void> | null = null;
    let again = false;
    const listeners = new Set<() => void>();
    /** The last page answered, for the next viewer asking the same of the same entries (invariant 4). */
    let cached: { key: string; page: TailPage } | null = null;
    /** Changes whenever `entries` or `head` do (the cache key). */
    let version = 0;

    /** Appends rows that directly follow `last` (invariant 1), then wakes the viewers. */
    const add = (rows: readonly LogEventRow[]): void => {
      if (rows.length === 0) return;
      // The rows' frames encoded into one buffer (invariant 4): a page is views of it.
      // A frame in parts is never joined into one string first (a copy of each row's text).
      const frames = rows.map(deps.frame);
      const lengths = frames.map((frame) =>
        typeof frame === 'string'
          ? Buffer.byteLength(frame)
          : frame.reduce((sum, part) => sum + Buffer.byteLength(part), 0),
      );
      const group = Buffer.allocUnsafe(lengths.reduce((sum, length) => sum + length, 0));
      let offset = 0;
      for (let k = 0; k < rows.length; k++) {
        const row = rows[k]!;
        const frame = frames[k]!;
        if (typeof frame === 'string') group.write(frame, offset);
        else {
          let at = offset;
          for (const part of frame) at += group.write(part, at);
        }
        entries.push({ id: BigInt(row.id), stream: row.stream, length: lengths[k]!, group, offset });
        offset += lengths[k]!;
      }
      bytes += group.length;
      last = BigInt(rows.at(-1)!.id);
      while (bytes > MAX_BYTES && head < entries.length) {
        const dropped = entries[head++]!;
        bytes -= dropped.length;
        floor = dropped.id;
      }
      if (head > 1024) {
        entries = entries.slice(head);
        head = 0;
      }
      version++;
      for (const listener of [...listeners]) listener();
    };

    const read = async (): Promise<void> => {
      for (;;) {
        const rows = await listLogEvents(deps.db, tenantId, conversationId, {
          after: last.toString(),
          streams: null,
          limit: PAGE_ROWS,
        });
        add(rows);
        if (rows.length < PAGE_ROWS) return;
      }
    };

    const refresh = (): Promise<void> => {
      if (reading) {
        again = true; // a wake-up during a read: read once more after it
        return reading;
      }
      reading = (async () => {
        do {
          again = false;
          await read();
        } while (again);
      })().finally(() => {
        reading = null;
      });
      return reading;
    };

    const key = `${tenantId}:${conversationId}`;
    const unsubscribe = deps.feed.subscribe(conversationId, (signal) => {
      if (signal.type !== 'events') return;
      if (signal.lastId !== '' && /^\d+$/.test(signal.lastId) && BigInt(signal.lastId) <= last) return;
      // Rows committed by this process's writer right after the ones held: no read (invariant 5).
      const committed = signal.committed;
      if (committed && !reading && BigInt(committed.after) === last) {
        add(committed.rows);
        return;
      }
      refresh().catch((err: unknown) =>
        deps.logger.warn(
          { conversationId, err: err instanceof Error ? err.message : String(err) },
          'log tail read failed',
        ),
      );
    });

    // Rows committed between the max(id) read and the subscription: read them now.
    refresh().catch(() => {});
    return {
      get floor() {
        return floor;
      },
      get last() {
        return last;
      },
      after(cursor, streams, maxBytes) {
        const key = `${version}:${cursor}:${streams?.join(',') ?? ''}:${maxBytes}`;
        if (cached?.key === key) return cached.page;
        let taken = 0;
        let resume = cursor;
        let stage = false;
        const parts: Buffer[] = [];
        // Binary search for the first entry after the cursor.
        let lo = head;
        let hi = entries.length;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          if (entries[mid]!.id <= cursor) lo = mid + 1;
          else hi = mid;
        }
        // Consecutive frames of one group go out as one view of it.
        let span: { group: Buffer; start: number; end: number } | null = null;
        let at = lo;
        for (; at < entries.length && taken < maxBytes; at++) {
          const entry = entries[at]!;
          resume = entry.id;
          if (streams && !streams.includes(entry.stream)) continue;
          const end = entry.offset + entry.length;
          if (span && span.group === entry.group && span.end === entry.offset) span.end = end;
          else {
            if (span) parts.push(span.group.subarray(span.start, span.end));
            span = { group: entry.group, start: entry.offset, end };
          }
          taken += entry.length;
          if (entry.stream === 'stage') stage = true;
        }
        if (span) parts.push(span.group.subarray(span.start, span.end));
        if (at >= entries.length && resume < last) resume = last;
        const page: TailPage = {
          frames: parts,
          last: resume,
          more: at < entries.length,
          stage,
        };
        cached = { key, page };
        return page;
      },
      refresh,
      onRows(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      release() {
        const held = tails.get(key);
        if (!held) return;
        held.holders--;
        if (held.holders > 0) return;
        tails.delete(key);
        unsubscribe();
        listeners.clear();
        cached = null;
      },
    };
  };

  return {
    async acquire(tenantId, conversationId) {
      const key = `${tenantId}:${conversationId}`;
      let held = tails.get(key);
      if (!held) {
        held = { tail: open(tenantId, conversationId), holders: 0 };
        tails.set(key, held);
        held.tail.catch(() => tails.delete(key));
      }
      held.holders++;
      return await held.tail;
    },
  };
}
