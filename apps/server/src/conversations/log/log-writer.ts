// The single log writer of a conversation: redact → budget → batched INSERT fenced by the
// owner's epoch → wake the readers. Nothing else appends to log_events.
//
// What must hold (tests in log-writer.test.ts unless named otherwise):
// 1. Nothing unredacted is persisted, broadcast or logged: every output byte passes through its
//    stream's StreamRedactor (one for stdout, one for stderr), every stage message through
//    registry.redact(), and every string of a turn event through registry.redact() before the
//    event is serialised (turn-events.ts), before it is queued. The text of a turn's `text`
//    events also passes through its own StreamRedactor first, as one stream: a runtime that
//    streams assistant text in deltas splits a secret the model repeats across events, which
//    each event on its own would not show (so a text event may carry the tail of the previous
//    delta, held back until it could not begin a secret; concatenated, the text is the
//    same). Test: "never stores a secret split across streamed text events". Errors are logged by code and message only, never
//    with row content. Tests: "never stores a secret printed whole, split at every offset or
//    base64-encoded at each alignment", and the SSE test of stream.routes.test.ts.
// 2. One batch = one SQL statement (atomic on its own, BATCH_STATEMENT): it advances
//    conversations.log_bytes `WHERE id = $1 AND owner_epoch = $2`, inserts the batch's rows in
//    one INSERT (their data cut from one bytea parameter by offset and length, in the order
//    given) and advances the turns' raw byte counters, all joined to that fenced UPDATE. No row
//    from the fence means another process owns the conversation: nothing is written, `failed`
//    resolves with StaleOwnerError and the writer stops. Test: "is fenced off once the epoch
//    moves on".
// 3. turns.stdout_raw_bytes / stderr_raw_bytes advance, in the same statement, by exactly the
//    raw (pre-redaction) bytes whose redacted output the batch stores or deliberately drops
//    (budget): bytes a redactor still holds back are not counted (StreamRedactor.emitted), so
//    after a crash "raw bytes counted" equals "raw bytes the log rows represent" and reattach
//    can drop exactly that many from the replayed head. Test: "counts the raw bytes of what it
//    stored, not what the redactor holds back".
// 4. Order: rows get ids in the order output and stages were handed in (one writer, batches
//    committed one after another, rows of a batch inserted in order). A stage row follows all
//    output written before it: stage() first ends the redactors' hold-back (a stage marks a
//    boundary, like the end of a command). Test: "keeps stage rows after the output before them".
//    A turn event row follows the output handed in before it, except the few bytes a redactor
//    still holds back (an event does not end the hold-back: that would let a secret split
//    across chunks through). Test: "stores turn events in order with the output, redacted".
// 5. A row never splits a multi-byte UTF-8 character: redactor output of valid UTF-8 is whole
//    characters, and rows are only cut between characters. Test: "never splits a character".
// 6. Budget (LOG_OUTPUT_BUDGET_MB, 0 = none): conversations.log_bytes counts stored output bytes
//    across wakes and processes (read once, then kept by this writer: only the fenced owner
//    advances it). Output is stored up to the budget, then exactly one truncation marker — a
//    stage row {stage:'log', state:'failed', message:'output budget of N MB reached; further
//    output is not stored'} — and log_truncated is set; later output is dropped (its raw bytes
//    still counted, invariant 3). Turn event rows count like output (their JSON bytes) but are
//    never cut: one that does not fit is dropped and brings the marker. Stage rows are always
//    stored and not counted. Tests: "stores output up to the budget, then one marker, across
//    writers", "counts turn events against the budget".
// 7. Readers are woken only after a commit, once per batch, in commit order: feed.publish(events,
//    lastId), with the committed rows as stored (ids, created_at) for readers in this process
//    (CommittedRows in contracts.ts: `after` chains a batch to this writer's previous one; for its
//    first batch it is the conversation's last row before the writer started, read with the
//    budget state: every earlier writer's batches committed before this owner's epoch did, and no
//    one else appends, so no row can come between them). The wake-up (and the settling of the
//    batch's stages) runs on the next turn of the event loop, after the next batch was sent;
//    flush(), close() and a stage's promise resolve only after it.
//    Test: "hands the rows it committed to the feed, as stored" (log-writer.test.ts).
// Metrics (when given): the bytes each committed batch stored, the marker of a reached budget,
// and the registry's redactions since the last commit (metrics.ts).
import type pg from 'pg';
import type { Logger } from '../../observability/logger.ts';
import type { Metrics } from '../../observability/metrics.ts';
import {
  type Feed,
  type LogWriter,
  type LogWriterFactory,
  type OwnerLease,
  type StageEvent,
  StaleOwnerError,
  type TurnEvent,
} from '../contracts.ts';
import type { SecretRegistry, StreamRedactor } from './redactor.ts';
import { storedEvent } from './turn-events.ts';

export interface LogWriterDeps {
  pool: pg.Pool;
  feed: Pick<Feed, 'publish'>;
  logger: Pick<Logger, 'warn'>;
  /** config.logOutputBudgetMb; 0 disables the budget. */
  outputBudgetMb: number;
  /** Batching interval (default 15 ms): output after a quiet spell is sent at once, further output waits
   * at most this long, so a stream of output costs at most one batch per interval. */
  flushIntervalMs?: number;
  /** A batch is sent at once when this many output bytes wait (default 256 KiB). */
  maxBatchBytes?: number;
  /**
   * Most bytes one batch takes from a backlog (default 4 MiB): while a batch commits, output keeps
   * queueing, and the next batch takes all of it up to this, so a flood costs few commits (each one
   * a WAL flush) instead of one per maxBatchBytes.
   */
  maxStatementBytes?: number;
  /** Largest `data` of one row (default 32 KiB); readers page by rows. */
  maxRowBytes?: number;
  /** Stored bytes, budgets reached, redactions (absent: not counted). */
  metrics?: Pick<Metrics, 'logBytes' | 'logBudgetReached' | 'logRedactions'>;
}

type OutputStream = 'stdout' | 'stderr';

interface OutputItem {
  kind: 'output';
  stream: OutputStream;
  turnId: string | null;
  pieces: Buffer[];
  bytes: number;
  /** Raw bytes these redacted bytes represent (counted on the turn, invariant 3). */
  raw: number;
  /** Taken by a batch in flight: later output goes to a new item. */
  sealed: boolean;
}

interface StageItem {
  kind: 'stage';
  event: StageEvent;
  message: string | null;
  settle: { resolve: () => void; reject: (err: Error) => void };
}

interface EventItem {
  kind: 'event';
  turnId: string;
  /** The redacted event's JSON (turn-events.ts), at most maxRowBytes. */
  data: Buffer;
}

type Item = OutputItem | StageItem | EventItem;

interface Row {
  turnId: string | null;
  stream: OutputStream | 'stage' | 'events';
  /** The row's bytes, whole or as pieces in order (an output item's redacted views). */
  data: Buffer | readonly Buffer[] | null;
  stage: string | null;
  state: string | null;
  durationMs: number | null;
  message: string | null;
}

const MAX_ROWS_PER_BATCH = 1000;

/**
 * One batch (invariant 2): the fence, the rows (their data cut from one bytea by offset and
 * length, in the order given: WITH ORDINALITY), the turns' raw byte counters. One constant text,
 * prepared once per connection. The ids come back in insertion order with now(), every row's
 * created_at (the column's default: the transaction's start), so the rows handed to readers are
 * as stored.
 */
const BATCH_STATEMENT = `WITH fence AS (
    UPDATE conversations SET log_bytes = log_bytes + $3::bigint, log_truncated = log_truncated OR $4::boolean
    WHERE id = $1::uuid AND owner_epoch = $2::bigint RETURNING tenant_id, id),
  ins AS (
    INSERT INTO log_events (tenant_id, conversation_id, turn_id, stream, data, stage, state, duration_ms, message)
    SELECT f.tenant_id, f.id, v.turn_id, v.stream,
      CASE WHEN v.len IS NULL THEN NULL ELSE substring($16::bytea FROM v.off + 1 FOR v.len) END,
      v.stage, v.state, v.duration_ms, v.message
    FROM fence f CROSS JOIN unnest($5::uuid[], $6::text[], $7::int[], $8::int[], $9::text[], $10::text[], $11::int[], $12::text[])
      WITH ORDINALITY AS v(turn_id, stream, off, len, stage, state, duration_ms, message, ord)
    ORDER BY v.ord RETURNING id),
  turn_bytes AS (
    UPDATE turns t SET stdout_raw_bytes = t.stdout_raw_bytes + u.o, stderr_raw_bytes = t.stderr_raw_bytes + u.e
    FROM fence f, unnest($13::uuid[], $14::bigint[], $15::bigint[]) AS u(id, o, e)
    WHERE t.id = u.id AND t.conversation_id = f.id)
  SELECT (SELECT count(*) FROM fence)::int AS owned, (SELECT array_agg(id ORDER BY id) FROM ins) AS ids, now() AS at`;
const MAX_MESSAGE_CHARS = 4000;

/** The longest prefix of `buf` of at most `limit` bytes that does not end inside a UTF-8 character. */
export function utf8Prefix(buf: Buffer, limit: number): number {
  if (limit >= buf.length) return buf.length;
  for (let at = limit; at > limit - 4 && at >= 0; at--) {
    if ((buf[at]! & 0xc0) !== 0x80) return at;
  }
  return limit; // not UTF-8 here: any cut is as good as another
}

export function truncationMessage(budgetMb: number): string {
  return `output budget of ${budgetMb} MB reached; further output is not stored`;
}

export function createLogWriterFactory(deps: LogWriterDeps): LogWriterFactory {
  return { create: (input) => createLogWriter(deps, input) };
}

export function createLogWriter(
  deps: LogWriterDeps,
  input: { lease: OwnerLease; registry: SecretRegistry },
): LogWriter {
  const { lease, registry } = input;
  const intervalMs = deps.flushIntervalMs ?? 15;
  const maxBatchBytes = deps.maxBatchBytes ?? 256 * 1024;
  const maxStatementBytes = Math.max(maxBatchBytes, deps.maxStatementBytes ?? 2 * 1024 * 1024);
  const maxRowBytes = deps.maxRowBytes ?? 32 * 1024;
  const budget = deps.outputBudgetMb > 0 ? deps.outputBudgetMb * 1024 * 1024 : Number.POSITIVE_INFINITY;

  const streams: Record<OutputStream, { redactor: StreamRedactor; turnId: string | null; counted: number }> =
    {
      stdout: { redactor: registry.stream(), turnId: null, counted: 0 },
      stderr: { redactor: registry.stream(), turnId: null, counted: 0 },
    };
  /** The running text of the current turn's `text` events (invariant 1). */
  const text: { redactor: StreamRedactor; turnId: string | null } = {
    redactor: registry.stream(),
    turnId: null,
  };
  const queue: Item[] = [];
  let queuedBytes = 0;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let closed = false;
  let failure: Error | null = null;
  let resolveFailed!: (err: Error) => void;
  const failed = new Promise<Error>((resolve) => {
    resolveFailed = resolve;
  });
  /** Budget state, read from the conversation row by the first batch (invariant 6). */
  let loaded = false;
  let logBytes = 0;
  let truncated = false;
  /** The registry's redactions already counted in the metric. */
  let redactionsCounted = registry.redactions;
  const countRedactions = (): void => {
    const now = registry.redactions;
    if (now > redactionsCounted) deps.metrics?.logRedactions.inc(now - redactionsCounted);
    redactionsCounted = now;
  };

  /**
   * Queues redacted output, as views of the pieces handed in (each valid UTF-8 when the output
   * is: rows are cut inside a piece, invariant 5), and the raw bytes it represents (may be empty
   * when a marker grew).
   */
  const append = (stream: OutputStream, parts: readonly Buffer[]): void => {
    const s = streams[stream];
    const raw = s.redactor.emitted - s.counted;
    s.counted = s.redactor.emitted;
    if (raw === 0 && parts.every((part) => part.length === 0)) return;
    const tail = queue[queue.length - 1];
    let last =
      tail?.kind === 'output' && !tail.sealed && tail.stream === stream && tail.turnId === s.turnId
        ? tail
        : undefined;
    const newRow = (): OutputItem => {
      const item: OutputItem = {
        kind: 'output',
        stream,
        turnId: s.turnId,
        pieces: [],
        bytes: 0,
        raw: 0,
        sealed: false,
      };
      queue.push(item);
      return item;
    };
    for (const out of parts) {
      let offset = 0;
      while (offset < out.length) {
        if (!last || last.bytes >= maxRowBytes) last = newRow();
        const rest = out.subarray(offset);
        const room = maxRowBytes - last.bytes;
        const take = rest.length <= room ? rest.length : utf8Prefix(rest, room);
        if (take === 0) {
          last = undefined; // the next character does not fit: it starts the next row
          continue;
        }
        last.pieces.push(rest.subarray(0, take));
        last.bytes += take;
        offset += take;
        queuedBytes += take;
      }
    }
    last ??= newRow();
    last.raw += raw;
  };

  const queueEvent = (turnId: string, event: TurnEvent): void => {
    const data = storedEvent(event, registry, maxRowBytes);
    if (!data) return;
    queue.push({ kind: 'event', turnId, data });
    queuedBytes += data.length;
  };

  /** The text a turn's text redactor still holds, as one more text event. */
  const endText = (): void => {
    const rest = text.redactor.flush();
    if (rest.length > 0 && text.turnId !== null)
      queueEvent(text.turnId, { kind: 'text', text: rest.toString('utf8') });
  };

  const endHoldBack = (): void => {
    for (const stream of ['stdout', 'stderr'] as const) append(stream, [streams[stream].redactor.flush()]);
    endText();
  };

  /**
   * The id of the last row this writer committed (CommittedRows.after); before its first commit,
   * the conversation's last row as the first batch read it (invariant 7), '0' when it had none.
   */
  let lastCommitted = '0';

  /** When the last batch started (performance.now()); -Infinity before the first. */
  let lastBatchAt = Number.NEGATIVE_INFINITY;

  // Output waits only until an interval has passed since the last batch started, so output after
  // a quiet spell goes out at once: the interval throttles a stream of output to about one batch
  // per interval, it is not a delay every first byte of a turn pays (design/performance.md:
  // follow-up → first byte).
  const schedule = (): void => {
    if (queuedBytes >= maxBatchBytes) {
      void kick();
      return;
    }
    if (timer || running) return;
    const wait = lastBatchAt + intervalMs - performance.now();
    if (wait <= 0) {
      void kick();
      return;
    }
    timer = setTimeout(() => {
      timer = null;
      void kick();
    }, wait);
  };

  const fail = (err: Error): void => {
    if (failure) return;
    failure = err;
    if (timer) clearTimeout(timer);
    timer = null;
    for (const item of queue.splice(0)) if (item.kind === 'stage') item.settle.reject(err);
    queuedBytes = 0;
    deps.logger.warn(
      { conversationId: lease.conversationId, err: err.name === 'StaleOwnerError' ? err.name : err.message },
      'log writer stopped',
    );
    resolveFailed(err);
  };

  /** Persists batches until the queue is empty; never rejects (a failure goes to `failed`). */
  const kick = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = null;
    running ??= (async () => {
      try {
        while (queue.length > 0 && !failure) await persistBatch();
      } catch (err) {
        fail(err instanceof Error ? err : new Error(String(err)));
      }
      await woken;
    })().finally(() => {
      running = null;
      if (queue.length > 0 && !failure) schedule();
    });
    return running;
  };

  /** The one truncation marker (invariant 6). */
  const budgetMarker = (turnId: string | null): Row => ({
    turnId,
    stream: 'stage',
    data: null,
    stage: 'log',
    state: 'failed',
    durationMs: null,
    message: truncationMessage(deps.outputBudgetMb),
  });

  const persistBatch = async (): Promise<void> => {
    lastBatchAt = performance.now();
    if (!loaded) {
      const res = await deps.pool.query<{
        log_bytes: number | string;
        log_truncated: boolean;
        mine: boolean;
        last_id: number | string | null;
      }>(
        `SELECT log_bytes, log_truncated, owner_epoch = $2 AS mine,
          (SELECT max(id) FROM log_events WHERE conversation_id = $1) AS last_id
        FROM conversations WHERE id = $1`,
        [lease.conversationId, lease.epoch],
      );
      const row = res.rows[0];
      if (!row?.mine) throw new StaleOwnerError(lease.conversationId);
      logBytes = Number(row.log_bytes);
      truncated = row.log_truncated;
      lastCommitted = String(row.last_id ?? 0);
      loaded = true;
    }
    // Take items up to the batch size (at least one).
    let take = 0;
    let bytes = 0;
    while (take < queue.length && take < MAX_ROWS_PER_BATCH) {
      const item = queue[take]!;
      const size = item.kind === 'output' ? item.bytes : item.kind === 'event' ? item.data.length : 0;
      if (take > 0 && bytes + size > maxStatementBytes) break;
      bytes += size;
      take++;
    }
    const items = queue.slice(0, take);
    for (const item of items) if (item.kind === 'output') item.sealed = true;
    const rows: Row[] = [];
    const raw = new Map<string, { stdout: number; stderr: number }>();
    let stored = 0;
    let nowTruncated = truncated;
    for (const item of items) {
      if (item.kind === 'stage') {
        const e = item.event;
        rows.push({
          turnId: e.turnId ?? null,
          stream: 'stage',
          data: null,
          stage: e.stage,
          state: e.state,
          durationMs: e.durationMs === undefined ? null : Math.max(0, Math.round(e.durationMs)),
          message: item.message,
        });
        continue;
      }
      if (item.kind === 'event') {
        if (nowTruncated) continue;
        if (item.data.length > budget - logBytes - stored) {
          nowTruncated = true;
          rows.push(budgetMarker(item.turnId));
          continue;
        }
        rows.push({
          turnId: item.turnId,
          stream: 'events',
          data: item.data,
          stage: null,
          state: null,
          durationMs: null,
          message: null,
        });
        stored += item.data.length;
        continue;
      }
      if (item.turnId && item.raw > 0) {
        const counts = raw.get(item.turnId) ?? { stdout: 0, stderr: 0 };
        counts[item.stream] += item.raw;
        raw.set(item.turnId, counts);
      }
      if (item.bytes === 0 || nowTruncated) continue;
      // The pieces stay views until the batch's one copy (batchData); only a cut joins them.
      let data: Buffer | readonly Buffer[] = item.pieces;
      let size = item.bytes;
      const room = budget - logBytes - stored;
      if (size > room) {
        const whole = Buffer.concat(item.pieces, item.bytes);
        data = whole.subarray(0, utf8Prefix(whole, room));
        size = data.length;
        nowTruncated = true;
      }
      if (size > 0) {
        rows.push({
          turnId: item.turnId,
          stream: item.stream,
          data,
          stage: null,
          state: null,
          durationMs: null,
          message: null,
        });
        stored += size;
      }
      if (nowTruncated) rows.push(budgetMarker(item.turnId));
    }

    // Every row's data in one bytea (the rows cut it by offset and length): one copy of the
    // batch's bytes, into one buffer that the driver copies once more into its message, instead
    // of a parameter per row that its message buffer copies again each time it grows
    // (docs/performance.md, "Seventh pass").
    const parts: Buffer[] = [];
    const offsets: (number | null)[] = [];
    const lengths: (number | null)[] = [];
    let dataBytes = 0;
    for (const row of rows) {
      if (row.data === null) {
        offsets.push(null);
        lengths.push(null);
        continue;
      }
      const pieces = Buffer.isBuffer(row.data) ? [row.data] : row.data;
      const length = pieces.reduce((sum, piece) => sum + piece.length, 0);
      offsets.push(dataBytes);
      lengths.push(length);
      parts.push(...pieces);
      dataBytes += length;
    }
    const batchData = parts.length === 1 ? parts[0]! : Buffer.concat(parts, dataBytes);
    const turnIds = [...raw.keys()];
    const res = await deps.pool.query<{ owned: number; ids: (number | string)[] | null; at: Date }>({
      name: 'paddock-log-batch',
      text: BATCH_STATEMENT,
      values: [
        lease.conversationId,
        lease.epoch,
        stored,
        nowTruncated,
        rows.map((r) => r.turnId),
        rows.map((r) => r.stream),
        offsets,
        lengths,
        rows.map((r) => r.stage),
        rows.map((r) => r.state),
        rows.map((r) => r.durationMs),
        rows.map((r) => r.message),
        turnIds,
        turnIds.map((id) => raw.get(id)!.stdout),
        turnIds.map((id) => raw.get(id)!.stderr),
        batchData, // last: the driver's message buffer then grows once, to fit it
      ],
    });
    if (res.rows[0]?.owned !== 1) throw new StaleOwnerError(lease.conversationId);

    // Committed: advance the writer's state; settle the stages and wake the readers once the
    // next batch is on its way (wakeSoon).
    logBytes += stored;
    if (stored > 0) deps.metrics?.logBytes.inc(stored);
    if (nowTruncated && !truncated) deps.metrics?.logBudgetReached.inc();
    countRedactions();
    truncated = nowTruncated;
    queue.splice(0, take);
    const stages: Array<{ resolve: () => void }> = [];
    for (const item of items) {
      if (item.kind === 'output') queuedBytes -= item.bytes;
      else if (item.kind === 'event') queuedBytes -= item.data.length;
      else stages.push(item.settle);
    }
    const ids = res.rows[0].ids;
    let signal: Parameters<Feed['publish']>[1] | null = null;
    if (ids && ids.length > 0) {
      const at = res.rows[0].at;
      const committed = rows.map((r, i) => ({
        id: String(ids[i]),
        turn_id: r.turnId,
        stream: r.stream,
        data: r.data === null ? null : batchData.subarray(offsets[i]!, offsets[i]! + lengths[i]!),
        stage: r.stage,
        state: r.state,
        duration_ms: r.durationMs,
        message: r.message,
        created_at: at,
      }));
      const after = lastCommitted;
      lastCommitted = String(ids.at(-1));
      signal = {
        type: 'events',
        lastId: lastCommitted,
        ...(ids.length === rows.length ? { committed: { after, rows: committed } } : {}),
      };
    }
    wakeSoon(() => {
      try {
        if (signal) deps.feed.publish(lease.conversationId, signal);
      } catch (err) {
        // The rows are stored: readers catch up on their next wake-up or heartbeat.
        deps.logger.warn(
          { conversationId: lease.conversationId, err: err instanceof Error ? err.message : String(err) },
          'log writer: waking the readers failed',
        );
      }
      for (const stage of stages) stage.resolve();
    });
  };

  /** Every batch committed so far has woken its readers and settled its stages. */
  let woken: Promise<void> = Promise.resolve();
  /**
   * Runs `wake` (publish a committed batch, settle its stages) on the event loop's next turn, in
   * commit order: by then the loop in kick() has sent the next batch's statement, so the readers'
   * work on these rows (framing them for SSE viewers, writing to their sockets) overlaps that
   * INSERT instead of holding it back (invariant 7; design/performance.md, log throughput).
   */
  const wakeSoon = (wake: () => void): void => {
    woken = new Promise((resolve) =>
      setImmediate(() => {
        try {
          wake();
        } finally {
          resolve();
        }
      }),
    );
  };

  const drain = async (): Promise<void> => {
    while (queue.length > 0 && !failure) await kick();
    if (failure) throw failure;
  };

  const assertOpen = (): void => {
    if (closed) throw new Error('log writer is closed');
  };

  return {
    failed,
    output(stream, chunk, turnId) {
      assertOpen();
      if (failure) return;
      const s = streams[stream];
      const owner = turnId ?? null;
      if (s.turnId !== owner) {
        // The previous command's held-back bytes belong to it (end of its output).
        append(stream, [s.redactor.flush()]);
        s.turnId = owner;
      }
      append(stream, s.redactor.writeParts(chunk));
      schedule();
    },
    event(turnId, event) {
      assertOpen();
      if (failure) return;
      if (event.kind === 'text' && typeof event.text === 'string') {
        if (text.turnId !== turnId) {
          endText();
          text.turnId = turnId;
        }
        const out = text.redactor.write(Buffer.from(event.text, 'utf8'));
        if (out.length > 0) queueEvent(turnId, { kind: 'text', text: out.toString('utf8') });
      } else {
        endText();
        queueEvent(turnId, event);
      }
      schedule();
    },
    stage(event) {
      // A promise in every case (its callers chain .catch() on it): a closed writer rejects.
      if (closed) return Promise.reject(new Error('log writer is closed'));
      if (failure) return Promise.reject(failure);
      endHoldBack();
      const message =
        event.message === undefined
          ? null
          : registry.redact(event.message).toString('utf8').slice(0, MAX_MESSAGE_CHARS);
      return new Promise<void>((resolve, reject) => {
        queue.push({ kind: 'stage', event, message, settle: { resolve, reject } });
        void kick();
      });
    },
    async flush() {
      assertOpen();
      if (failure) throw failure;
      endHoldBack();
      await drain();
    },
    async close() {
      if (closed) return;
      if (!failure) endHoldBack();
      closed = true;
      try {
        await drain();
      } finally {
        if (timer) clearTimeout(timer);
        timer = null;
        countRedactions();
      }
    },
  };
}
