// Wake-ups for log readers in every process: in-process fan-out plus PostgreSQL LISTEN/NOTIFY.
//
// What must hold (tests in feed.test.ts):
// 1. Signals only say "look": the rows carry the data. A reader that misses a signal loses no
//    row, it only learns of it later; so a signal may be coalesced or dropped, never invented
//    before its rows are committed (the log writer publishes after its commit). Test: "wakes a
//    subscriber in another process". A local events signal may also carry the committed rows
//    (FeedSignal.committed, for this process's log tails); the NOTIFY never does (its payload
//    is built field by field below), so no row content leaves the process this way.
// 2. One listening connection per process, opened on the first subscription (or listening()),
//    whatever the number of conversations and readers. Test: "uses one listening connection".
// 3. A subscriber in this process hears a publish at once (no database round trip) and not a
//    second time when the NOTIFY comes back: payloads carry the publishing feed's node id.
//    Test: "delivers a local publish once".
// 4. A dropped LISTEN connection is re-opened (backoff up to 5 s); once it listens again every
//    subscriber gets `{type:'events', lastId: ''}` (RESYNC: "something may have happened while
//    nobody listened, re-query"), as it does when listening first starts, which closes the
//    race between a reader's first query and the LISTEN. Test: "re-listens after its
//    connection is killed".
// 5. NOTIFYs are batched: while one is in flight, further publishes queue and go out together
//    in one statement, and events signals for the same conversation collapse to the latest.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../../observability/logger.ts';
import type { Feed, FeedSignal } from '../contracts.ts';

export const FEED_CHANNEL = 'paddock_log';
/** lastId of the signal sent when listening (re)starts: unknown, re-query from your cursor. */
export const RESYNC_LAST_ID = '';

export interface PgFeed extends Feed {
  /** Resolves once this process LISTENs (opening the connection if nobody subscribed yet). */
  listening(): Promise<void>;
  /** The backend pid of the listening connection, null while not connected (tests kill it). */
  listenerPid(): number | null;
}

export interface FeedDeps {
  pool: pg.Pool;
  /** How to open the dedicated listening connection (same database as the pool). */
  clientConfig: pg.ClientConfig;
  logger: Pick<Logger, 'warn' | 'debug'>;
  /** First reconnect delay; doubles up to 5 s. */
  reconnectDelayMs?: number;
}

/** On the wire: `{n: node, c: conversation, t: type, id?: lastId, s?: status}`. */
interface Payload {
  n: string;
  c: string;
  t: FeedSignal['type'];
  id?: string;
  s?: string;
}

const MAX_RECONNECT_DELAY_MS = 5000;

export function createFeed(deps: FeedDeps): PgFeed {
  const node = randomBytes(8).toString('hex');
  const listeners = new Map<string, Set<(signal: FeedSignal) => void>>();
  let client: pg.Client | null = null;
  let connecting: Promise<void> | null = null;
  let reconnectTimer: NodeJS.Timeout | null = null;
  let delay = deps.reconnectDelayMs ?? 100;
  let closed = false;

  /** Queued NOTIFY payloads; events signals per conversation collapse (invariant 5). */
  const outbox = new Map<string, Payload>();
  let sending: Promise<void> | null = null;

  const deliver = (conversationId: string, signal: FeedSignal): void => {
    const set = listeners.get(conversationId);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(signal);
      } catch (err) {
        deps.logger.warn({ err: String(err) }, 'feed listener failed');
      }
    }
  };

  const resyncAll = (): void => {
    for (const id of [...listeners.keys()]) deliver(id, { type: 'events', lastId: RESYNC_LAST_ID });
  };

  const onNotification = (message: pg.Notification): void => {
    if (message.channel !== FEED_CHANNEL || !message.payload) return;
    let payload: Payload;
    try {
      payload = JSON.parse(message.payload) as Payload;
    } catch {
      return;
    }
    if (payload.n === node || typeof payload.c !== 'string') return;
    if (payload.t === 'events' && typeof payload.id === 'string')
      deliver(payload.c, { type: 'events', lastId: payload.id });
    else if (payload.t === 'status' && typeof payload.s === 'string')
      deliver(payload.c, { type: 'status', status: payload.s });
    else if (payload.t === 'owner_lost') deliver(payload.c, { type: 'owner_lost' });
  };

  const scheduleReconnect = (): void => {
    if (closed || reconnectTimer) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = null;
      void connect().catch(() => scheduleReconnect());
    }, delay);
    reconnectTimer.unref();
    delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
  };

  const connect = (): Promise<void> => {
    if (client) return Promise.resolve();
    connecting ??= (async () => {
      const next = new pg.Client(deps.clientConfig);
      const lost = (err?: Error): void => {
        if (client !== next) return;
        client = null;
        if (!closed)
          deps.logger.warn({ err: err ? err.message : 'ended' }, 'feed: listening connection lost');
        next.removeAllListeners('notification');
        next.end().catch(() => {});
        scheduleReconnect();
      };
      next.on('error', lost);
      next.on('end', () => lost());
      next.on('notification', onNotification);
      try {
        await next.connect();
        await next.query(`LISTEN ${FEED_CHANNEL}`);
      } catch (err) {
        next.removeAllListeners();
        next.on('error', () => {});
        await next.end().catch(() => {});
        throw err;
      }
      if (closed) {
        await next.end().catch(() => {});
        return;
      }
      client = next;
      delay = deps.reconnectDelayMs ?? 100;
      resyncAll();
    })().finally(() => {
      connecting = null;
    });
    return connecting;
  };

  const send = (): void => {
    if (sending || outbox.size === 0) return;
    const payloads = [...outbox.values()].map((p) => JSON.stringify(p));
    outbox.clear();
    sending = deps.pool
      .query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', [FEED_CHANNEL, payloads])
      .then(
        () => {},
        (err: Error) => {
          // Readers re-query on their heartbeat and on resync; a lost wake-up delays, never loses, a row.
          deps.logger.warn({ err: err.message }, 'feed: NOTIFY failed');
        },
      )
      .finally(() => {
        sending = null;
        if (!closed) send();
      });
  };

  return {
    publish(conversationId, signal) {
      if (closed) return;
      deliver(conversationId, signal);
      const payload: Payload = { n: node, c: conversationId, t: signal.type };
      if (signal.type === 'events') payload.id = signal.lastId;
      if (signal.type === 'status') payload.s = signal.status;
      // Events collapse to the latest per conversation; other signals each keep their place.
      const key =
        signal.type === 'events' ? `e:${conversationId}` : `${signal.type}:${conversationId}:${outbox.size}`;
      outbox.delete(key);
      outbox.set(key, payload);
      send();
    },
    subscribe(conversationId, listener) {
      let set = listeners.get(conversationId);
      if (!set) {
        set = new Set();
        listeners.set(conversationId, set);
      }
      set.add(listener);
      if (!closed && !client) void connect().catch(() => scheduleReconnect());
      return () => {
        const current = listeners.get(conversationId);
        if (!current) return;
        current.delete(listener);
        if (current.size === 0) listeners.delete(conversationId);
      };
    },
    async listening() {
      if (closed) throw new Error('feed closed');
      await connect();
    },
    listenerPid() {
      return (client as (pg.Client & { processID?: number }) | null)?.processID ?? null;
    },
    async close() {
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      reconnectTimer = null;
      await connecting?.catch(() => {});
      await sending;
      const current = client;
      client = null;
      listeners.clear();
      if (current) {
        current.removeAllListeners('notification');
        await current.end().catch(() => {});
      }
    },
  };
}
