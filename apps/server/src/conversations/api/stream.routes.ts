// GET /api/conversations/:id/stream (SSE) and GET /api/conversations/:id/events (JSON): two
// views of the same rows, with the same ids and payloads.
//
// What must hold (tests in stream.routes.test.ts):
// 1. The rows are the data, the feed only wakes: a viewer replays from its cursor (Last-Event-ID
//    or ?after=, strictly after), then re-queries after its cursor on every wake-up, on every
//    heartbeat and when the feed re-listens; so a lost signal delays an event, never loses it,
//    and a viewer in any process sees rows written in any other. Tests: "resumes strictly after
//    Last-Event-ID", "a viewer on another instance sees rows written through the first".
// 2. Memory per viewer is bounded: rows are read a page at a time and the next page is read only
//    once the socket took the last one (a stalled client costs one page, and resumes where it
//    stopped); each page is one socket write. Test: "delivers a large backlog in order".
// 3. Never silent heartbeats: while the conversation is pending or running and no process holds
//    its ownership lock, or the holder's owner lease expired (a hung owner, owner.ts invariant
//    7), every heartbeat sends `event: owner_lost` instead of a ping. A feed `owner_lost` (the
//    replica fencing a hung owner publishes it just before it frees the locks and adopts) sends
//    it at once while the conversation is pending or running: it is that moment's news, true
//    when published, and the adoption right after it may already be done when the viewer looks.
//    Tests: "tells the viewer when the owner is gone" (conversations.stream.test.ts), "a
//    SIGSTOPped owner is replaced…" (conversations.hung-owner.test.ts).
// 4. Who may read: the tenant's full-scope credentials, and a sandbox callback key as
//    sandbox-key.ts rules (its own conversation and its descendants); anything else is 404. Only
//    the former clears `unread`. Test: "a callback key cannot read another conversation of the tenant".
// 5. Without `streams` a reader gets stdout, stderr and stage, as before the `events` stream
//    existed: the turn events (a second view of stdout) come only to a reader that asks for
//    them, so an existing client never meets a stream it does not know and nobody pays for
//    both views unasked. Test (conversations.events.test.ts): "offers turn events only to
//    readers that ask for them".
// 6. A viewer whose cursor is below the shared tail's floor reads the database. A read that came
//    back complete (less than a page) moves the cursor up to the tail's newest row as it was when
//    the read started: every row up to it was committed before (rows commit in id order, one
//    writer per conversation), so the read answered all of them that the streams filter keeps.
//    A viewer whose filter matched nothing yet (`streams=stdout` while only stages exist) so
//    joins the tail instead of querying PostgreSQL on every wake-up. Test: "a filtered viewer
//    with nothing to read yet follows from the shared tail".
// 7. A stream's viewer lives exactly as long as its slot (stream-viewers.ts): the slot is taken
//    and the client's close is listened for before the handler's first await, and releasing the
//    slot (socket closed, body closed, stream ended, server stopping) stops the viewer. So a
//    viewer whose client left never marks a turn read. Tests (conversations.stream-abort.test.ts):
//    "1,000 streams aborted at random points leave no viewer, timer or database activity behind",
//    "a turn that nobody watches ends unread".
import { PassThrough } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PageMeta } from '../../accounts/accounts.schemas.ts';
import { principalOf } from '../../auth/auth.plugin.ts';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/database.ts';
import { AppError } from '../../http/errors.ts';
import type { Logger } from '../../observability/logger.ts';
import type { Metrics } from '../../observability/metrics.ts';
import { isUuid } from '../../resources/fields.ts';
import { ErrorResponse, ValidationErrorResponse } from '../../resources/responses.ts';
import type { Feed, OwnershipProbe } from '../contracts.ts';
import type { LogStream } from '../conversations.tables.ts';
import { clearUnread, findConversationRef, type LogEventRow, listLogEvents } from '../log/log-events.repo.ts';
import type { LogTail, LogTails } from '../log/log-tail.ts';
import { readStoredEvent } from '../log/turn-events.ts';
import type { SandboxKeyRule } from './sandbox-key.ts';
import { SSE_HEADERS, SSE_PING, SSE_RETRY, sseEvent, sseEventParts } from './sse.ts';
import { createStreamViewers } from './stream-viewers.ts';

const TAG = 'Conversations';
const security = [{ bearer: [] }];
const STREAMS = ['stdout', 'stderr', 'stage', 'events'] as const;
/** What a reader gets without `streams` (invariant 5). */
const DEFAULT_STREAMS: LogStream[] = ['stdout', 'stderr', 'stage'];
/** Rows per read of a viewer: rows are ≤ 32 KiB, so a page is ≤ 2 MiB. */
const PAGE_ROWS = 64;
const CURSOR_RE = /^\d{1,15}$/;
/** Most bytes of frames a caught-up viewer writes at once from the shared tail. */
const TAIL_WRITE_BYTES = 1024 * 1024;
/** A following viewer whose read failed reads again after this long. */
const READ_RETRY_MS = 1000;

export interface StreamOptions {
  /** Interval of heartbeats and ownership checks (default 15 s; tests shorten it). */
  heartbeatMs: number;
}

export interface StreamRoutesDeps {
  db: Db;
  /** The process's shared per-conversation tails (log-tail.ts). */
  logTails: LogTails;
  logger: Logger;
  feed: Feed;
  ownershipProbe: OwnershipProbe;
  /** Read on every request, so a test can shorten the heartbeat of a running app. */
  streamOptions: StreamOptions;
  sandboxKey: Pick<SandboxKeyRule, 'mayRead'>;
  metrics: Pick<Metrics, 'streamViewers'>;
}

const StreamsParam = z
  .string()
  .max(100)
  .refine((v) => v.split(',').every((s) => (STREAMS as readonly string[]).includes(s.trim())), {
    message: 'must be a comma-separated list of stdout, stderr, stage, events',
  })
  .optional()
  .describe(
    'Comma-separated streams to include: stdout, stderr, stage, events (default: stdout,stderr,stage; ' +
      'the turn events come only when asked for)',
  );

const Cursor = z
  .string()
  .regex(CURSOR_RE, 'must be an event id (a non-negative integer)')
  .describe('Return events strictly after this event id');

const Params = z.object({ id: z.string().max(200) });

const StreamQuery = z.object({
  streams: StreamsParam,
  after: Cursor.optional(),
  wait: z
    .enum(['true', 'false'])
    .optional()
    .describe('false: send the events that exist, then `event: end`, and close (default true: follow)'),
});

const EventsQuery = z.object({
  streams: StreamsParam,
  after: Cursor.optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

const Truncated = z
  .literal(true)
  .optional()
  .describe('Set when strings of the event were cut to fit one log event (at most 32 KiB)');

/** The common turn event (contracts.ts TurnEvent) as served: a union on `kind`. */
export const TurnEventSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('text'), text: z.string(), truncated: Truncated }).describe('Assistant text'),
    z
      .object({
        kind: z.literal('tool_call'),
        id: z.string().optional(),
        name: z.string().describe("The runtime's own tool name (Bash, Edit, shell, …)"),
        input: z.unknown().describe('The tool input as the runtime gave it (JSON, redacted)'),
        truncated: Truncated,
      })
      .describe('The agent called a tool'),
    z
      .object({
        kind: z.literal('tool_result'),
        id: z
          .string()
          .optional()
          .describe('The id of the tool_call this answers, when the runtime gives one'),
        is_error: z.boolean(),
        output: z.string(),
        truncated: Truncated,
      })
      .describe("A tool's result"),
    z
      .object({ kind: z.literal('error'), message: z.string(), truncated: Truncated })
      .describe('An error the runtime reported'),
    z
      .object({
        kind: z.literal('usage'),
        usage: z.object({
          input_tokens: z.number().optional(),
          output_tokens: z.number().optional(),
          cache_read_tokens: z.number().optional(),
          cost_usd: z.number().optional(),
        }),
        truncated: Truncated,
      })
      .describe("This turn's token usage and cost, as far as the runtime reports them"),
    z
      .object({ kind: z.literal('session'), session_id: z.string(), truncated: Truncated })
      .describe("The runtime's session id (resumed by the next turn)"),
    z
      .object({ kind: z.literal('raw'), line: z.string(), truncated: Truncated })
      .describe('A line of output the runtime adapter does not understand, kept as it is'),
  ])
  .describe('A common turn event (stream `events`); every string is redacted');

export const LogEvent = z
  .object({
    id: z.string().describe('The event id (also the SSE id), increasing within a conversation'),
    stream: z.enum(STREAMS),
    turn_id: z.string().nullable(),
    created_at: z.string(),
    text: z
      .string()
      .optional()
      .describe('stdout/stderr: the redacted output, UTF-8 (never a split character)'),
    stage: z.string().optional().describe('stage events: provision, clone, turn, log, …'),
    state: z.enum(['started', 'done', 'failed', 'interrupted']).optional(),
    duration_ms: z.number().int().nullable().optional(),
    message: z.string().nullable().optional(),
    event: TurnEventSchema.optional().describe('events: the turn event'),
  })
  .describe('One conversation log event');

type LogEventJson = z.infer<typeof LogEvent>;

export function logEventView(row: LogEventRow): LogEventJson {
  const base = {
    id: String(row.id),
    stream: row.stream,
    turn_id: row.turn_id,
    created_at: row.created_at.toISOString(),
  };
  if (row.stream === 'events') return { ...base, event: readStoredEvent(row.data) };
  if (row.stream !== 'stage') return { ...base, text: (row.data ?? Buffer.alloc(0)).toString('utf8') };
  return {
    ...base,
    stage: row.stage ?? '',
    state: (row.state ?? 'done') as LogEventJson['state'] & string,
    duration_ms: row.duration_ms,
    message: row.message,
  };
}

function parseStreams(value: string | undefined): LogStream[] {
  if (!value) return DEFAULT_STREAMS;
  return [...new Set(value.split(',').map((s) => s.trim() as LogStream))];
}

/** The conversation, if this principal may read its log (invariant 4); else 404. */
async function readable(deps: StreamRoutesDeps, principal: Principal, id: string) {
  const notFound = AppError.notFound('conversation');
  if (!isUuid(id)) throw notFound;
  const conversation = await findConversationRef(deps.db, principal.tenantId, id);
  if (!conversation) throw notFound;
  if (!(await deps.sandboxKey.mayRead(principal, conversation.id))) throw notFound;
  return conversation;
}

function resumeCursor(header: string | string[] | undefined, after: string | undefined): string {
  const lastEventId = Array.isArray(header) ? header[0] : header;
  if (lastEventId !== undefined && lastEventId.trim() !== '') {
    if (!CURSOR_RE.test(lastEventId.trim()))
      throw AppError.validation({ 'last-event-id': ['must be an event id (a non-negative integer)'] });
    return lastEventId.trim();
  }
  return after ?? '0';
}

export function streamRoutes(deps: StreamRoutesDeps): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const viewers = createStreamViewers(deps.metrics.streamViewers);
    const { logTails } = deps;
    // Open streams end when the server stops (clients resume elsewhere with Last-Event-ID).
    app.addHook('preClose', async () => {
      viewers.closeAll();
    });
    app.addHook('onClose', async () => {
      await deps.feed.close();
    });

    app.get(
      '/api/conversations/:id/stream',
      {
        onRequest: [app.requireAuth],
        config: { allowConversationScope: true },
        schema: {
          tags: [TAG],
          summary: 'Follow a conversation log as server-sent events',
          description:
            'Each event: `id: <event id>`, `event: stdout|stderr|stage|events`, `data: <LogEvent JSON>`. ' +
            'Resume with the `Last-Event-ID` header (or `after`). `: ping` comments while idle; ' +
            '`event: owner_lost` when the conversation is pending/running and no server owns it; ' +
            '`event: end` before the server closes a `wait=false` stream or a deleted conversation.',
          security,
          params: Params,
          querystring: StreamQuery,
          response: {
            200: {
              description: 'An event stream (text/event-stream)',
              content: { 'text/event-stream': { schema: z.string() } },
            },
            404: ErrorResponse,
            422: ValidationErrorResponse,
            429: ErrorResponse,
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        // The slot and the close listener come before the first await (invariant 7): a client
        // that left already (while the auth hook ran) or leaves while the checks below run gets
        // no viewer, and one that leaves later stops its viewer, whichever of its socket and the
        // body closes first.
        const slot = viewers.open(principal.tenantId);
        reply.raw.once('close', slot.close);
        if (reply.raw.destroyed) slot.close();
        const ownerReads = principal.scope === 'full';
        let conversationId: string;
        let cursor: string;
        try {
          conversationId = (await readable(deps, principal, request.params.id)).id;
          cursor = resumeCursor(request.headers['last-event-id'], request.query.after);
          if (ownerReads && !slot.closed) await clearUnread(deps.db, principal.tenantId, conversationId);
        } catch (err) {
          slot.close();
          throw err;
        }
        const out = new PassThrough();
        out.once('close', slot.close);
        if (slot.closed) out.end();
        else
          slot.attach(
            startViewer({
              ...deps,
              logTails,
              out,
              tenantId: principal.tenantId,
              conversationId,
              cursor: BigInt(cursor),
              streams: parseStreams(request.query.streams),
              follow: request.query.wait !== 'false',
              ownerReads,
              heartbeatMs: deps.streamOptions.heartbeatMs,
            }),
          );
        // The 200 schema describes the text/event-stream for the OpenAPI document; the body is a
        // stream, which Fastify pipes without serializing (the type provider cannot express that).
        return reply.headers(SSE_HEADERS).send(out as unknown as string);
      },
    );

    app.get(
      '/api/conversations/:id/events',
      {
        onRequest: [app.requireAuth],
        config: { allowConversationScope: true },
        schema: {
          tags: [TAG],
          summary: 'Read a conversation log as JSON, a page at a time',
          description:
            'The same events, ids and payloads as the stream. Pass the last id you have as `after` ' +
            '(or meta.next_cursor) to read on.',
          security,
          params: Params,
          querystring: EventsQuery,
          response: {
            200: z.object({ data: z.array(LogEvent), meta: PageMeta }),
            404: ErrorResponse,
            422: ValidationErrorResponse,
          },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const conversation = await readable(deps, principal, request.params.id);
        const { limit } = request.query;
        const rows = await listLogEvents(deps.db, principal.tenantId, conversation.id, {
          after: request.query.after ?? '0',
          streams: parseStreams(request.query.streams),
          limit: limit + 1,
        });
        if (principal.scope === 'full') await clearUnread(deps.db, principal.tenantId, conversation.id);
        const data = rows.slice(0, limit).map(logEventView);
        const hasMore = rows.length > limit;
        return { data, meta: { next_cursor: hasMore ? data.at(-1)!.id : null, has_more: hasMore } };
      },
    );
  };
}

export function logEventFrame(row: LogEventRow): string {
  return sseEvent(row.stream, logEventView(row), String(row.id));
}

/**
 * logEventFrame's bytes in parts: an output row's text as its own JSON string between the rest of
 * the event (the same keys in the same order), so that the shared tail encodes it without first
 * joining the parts into one string (log-tail.ts).
 */
export function logEventFrameParts(row: LogEventRow): string | readonly string[] {
  if (row.stream !== 'stdout' && row.stream !== 'stderr') return logEventFrame(row);
  const { text, ...rest } = logEventView(row) as { text: string };
  return sseEventParts(row.stream, rest, 'text', text, String(row.id));
}

interface ViewerInput extends StreamRoutesDeps {
  logTails: LogTails;
  out: PassThrough;
  tenantId: string;
  conversationId: string;
  cursor: bigint;
  streams: LogStream[];
  follow: boolean;
  ownerReads: boolean;
  heartbeatMs: number;
}

/** Replays, then (follow) tails one conversation into `out`; returns the function that stops it. */
function startViewer(input: ViewerInput): () => void {
  const { out, db, tenantId, conversationId } = input;
  let cursor = input.cursor;
  let stopped = false;
  let dirty = true;
  let pumping = false;
  let timer: NodeJS.Timeout | null = null;
  let retry: NodeJS.Timeout | null = null;
  let unsubscribe = (): void => {};
  /** Set once acquired (follow mode): caught-up reads come from the shared tail. */
  let tail: LogTail | null = null;
  let releaseTail = (): void => {};

  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    unsubscribe();
    releaseTail();
    if (timer) clearInterval(timer);
    if (retry) clearTimeout(retry);
    if (!out.destroyed) out.end();
  };
  const fail = (err: unknown): void => {
    input.logger.warn(
      { conversationId, err: err instanceof Error ? err.message : String(err) },
      'log stream failed',
    );
    stop();
  };
  const write = (data: string | Buffer): boolean => !stopped && out.write(data);
  const writeAll = (frames: readonly Buffer[]): boolean => {
    let ok = true;
    for (const frame of frames) ok = write(frame);
    return ok;
  };
  const drained = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        out.off('drain', done);
        out.off('close', done);
        resolve();
      };
      out.on('drain', done);
      out.on('close', done);
    });
  const end = (data: Record<string, unknown>): void => {
    write(sseEvent('end', data));
    stop();
  };

  /** Sends every row after the cursor (invariants 1 and 2); ends a wait=false stream once drained. */
  const pump = async (): Promise<void> => {
    if (pumping || stopped) return;
    pumping = true;
    try {
      while (dirty && !stopped) {
        dirty = false;
        if (tail && cursor >= tail.floor) {
          const got = tail.after(cursor, input.streams, TAIL_WRITE_BYTES);
          cursor = got.last;
          if (got.more) dirty = true;
          if (got.frames.length > 0 && !writeAll(got.frames)) await drained();
          if (input.ownerReads && got.stage) await clearUnread(db, tenantId, conversationId);
          continue;
        }
        // Every row up to the tail's newest was committed before this read starts (invariant 6).
        const held = tail?.last ?? null;
        const rows = await listLogEvents(db, tenantId, conversationId, {
          after: cursor.toString(),
          streams: input.streams,
          limit: PAGE_ROWS,
        });
        if (rows.length === PAGE_ROWS) dirty = true;
        if (stopped) break;
        if (rows.length > 0) cursor = BigInt(rows.at(-1)!.id);
        // A complete read answered every row up to `held` that the filter keeps: the cursor joins
        // the tail even when the filter kept none of them.
        if (rows.length < PAGE_ROWS && held !== null && held > cursor) cursor = held;
        if (rows.length === 0) break;
        const page = rows.map(logEventFrame).join('');
        if (!write(page)) await drained();
        if (input.ownerReads && rows.some((row) => row.stream === 'stage'))
          await clearUnread(db, tenantId, conversationId);
      }
      if (!input.follow && !stopped) end({ last_event_id: cursor.toString() });
    } catch (err) {
      if (!input.follow) fail(err);
      else if (!stopped && !retry) {
        // A failed read (a pool busy past its connect timeout, a dropped connection) delays a
        // following viewer, it does not end its stream: it reads on from its cursor (invariant 1).
        input.logger.warn(
          { conversationId, err: err instanceof Error ? err.message : String(err) },
          'log stream read failed; retrying',
        );
        retry = setTimeout(() => {
          retry = null;
          dirty = true;
          void pump();
        }, READ_RETRY_MS);
      }
    } finally {
      pumping = false;
      if (dirty && !stopped) void pump();
    }
  };

  /** The heartbeat: a ping, or owner_lost (invariant 3), or `end` when the conversation is gone. */
  const beat = async (ping: boolean, ownerLost = false): Promise<void> => {
    try {
      const conversation = await findConversationRef(db, tenantId, conversationId);
      if (stopped) return;
      if (!conversation) return end({ reason: 'deleted' });
      const live = conversation.status === 'pending' || conversation.status === 'running';
      if (live && (ownerLost || !(await input.ownershipProbe.isOwned(conversationId)))) {
        if (!stopped)
          write(sseEvent('owner_lost', { conversation_id: conversationId, status: conversation.status }));
      } else if (ping && !out.writableNeedDrain) write(SSE_PING);
    } catch (err) {
      fail(err);
    }
  };

  // Tells EventSource clients how soon to reconnect, and puts the headers on the wire at once.
  write(SSE_RETRY);
  if (input.follow) {
    unsubscribe = input.feed.subscribe(conversationId, (signal) => {
      if (signal.type === 'events') {
        if (tail) return; // the tail reads and wakes this viewer
        if (signal.lastId !== '' && /^\d+$/.test(signal.lastId) && BigInt(signal.lastId) <= cursor) return;
        dirty = true;
        void pump();
      } else {
        // status or owner_lost: look at the row and the lock now, and catch up on rows.
        if (signal.type === 'status' && input.ownerReads)
          void clearUnread(db, tenantId, conversationId).catch(fail);
        void beat(false, signal.type === 'owner_lost');
        dirty = true;
        void pump();
      }
    });
    timer = setInterval(() => {
      dirty = true;
      void pump();
      tail?.refresh().catch(fail);
      void beat(true);
    }, input.heartbeatMs);
    input.logTails.acquire(tenantId, conversationId).then(
      (acquired) => {
        if (stopped) return acquired.release();
        tail = acquired;
        const off = acquired.onRows(() => {
          dirty = true;
          void pump();
        });
        releaseTail = () => {
          off();
          acquired.release();
        };
        dirty = true;
        void pump();
      },
      (err: unknown) => input.logger.warn({ conversationId, err: String(err) }, 'log tail unavailable'),
    );
    void pump().then(() => beat(false));
  } else {
    void pump();
  }
  return stop;
}
