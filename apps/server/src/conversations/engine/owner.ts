// Ownership: exactly one owner per live conversation across every server process sharing the
// database (architecture §6).
//
// What must hold:
// 1. A process owns a conversation while it holds the session advisory lock
//    hashtextextended('paddock:conversation:' || id, 0) on its ONE dedicated connection; a
//    second process's tryAcquire fails while the first holds it (test: "a second process
//    cannot take a conversation its owner holds", conversations.ownership.test.ts).
// 2. Taking ownership bumps conversations.owner_epoch and the lease carries the new value:
//    every owner write checks it (owner-writes.repo.ts, the log writer), so a paused old owner
//    whose lock was lost can no longer write (StaleOwnerError).
// 3. If the dedicated connection drops, every lock it held is gone with it: onLost fires once
//    and the engine stops all of this process's conversation servers at once, before another
//    process can have taken them over and written (the epoch fences the rest).
// 3a. After a drop the connection is re-opened by this module alone, at once and then with
//    exponential backoff (100 ms doubling to RECONNECT_MAX_DELAY_MS) until the database answers,
//    re-LISTENing every channel; meanwhile a caller fails at once with the last connection error
//    (a database-unavailable one, so the API answers 503) instead of opening a connection of its
//    own; onRestored fires once it is open again (the engine then adopts at once). Only the
//    established connection's drop counts as a loss (a failed attempt is not one),
//    and an outage logs three lines: the loss, the first failed attempt, the recovery. Test:
//    "PostgreSQL down for 10 s mid-turn…" (conversations.database-outage.test.ts; issue 39,
//    finding 7: without the backoff it logged ~7,500 lines a second).
// 4. The same connection LISTENs for commands (commands.ts), so a process that cannot hear
//    commands also owns nothing.
// 5. isOwned answers from pg_locks, from any connection, without taking the lock (a probe
//    must never make a real owner's tryAcquire fail).
// 6. The lock and the epoch bump are one statement (one round trip), the bump only when the lock
//    was taken; a lock taken for a conversation that is gone, or by a statement that failed, is
//    released at once (session advisory locks survive a failed statement).
import pg from 'pg';
import type { Logger } from '../../observability/logger.ts';
import type { OwnerLease, OwnershipProbe } from '../contracts.ts';
import type { ConversationStatus } from '../conversations.tables.ts';

export const LOCK_NAMESPACE = 'paddock:conversation:';

/**
 * The keys of every session advisory lock granted in this database, as the bigint
 * hashtextextended(...) gave pg_try_advisory_lock (pg_locks splits it over classid, the high
 * half, and objid, the low half): `hashtextextended(key, 0) IN (HELD_LOCK_KEYS)` asks whether
 * anyone holds `key` without taking it (isOwned; the orphan probe, lifecycle.ts).
 */
export const HELD_LOCK_KEYS = `SELECT (classid::int8 << 32) | objid::int8 FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND objsubid = 1
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

export interface Ownership extends OwnershipProbe {
  /** Opens the dedicated connection (idempotent). */
  open(): Promise<void>;
  /** The lock and a fresh lease, or null when another process owns the conversation. */
  tryAcquire(tenantId: string, conversationId: string): Promise<AcquiredLease | null>;
  release(conversationId: string): Promise<void>;
  /** Whether this process holds the conversation. */
  holds(conversationId: string): boolean;
  /** A cluster-wide one-shot lock (the boot sweep): true for the first process to ask while it runs. */
  tryClusterLock(name: string): Promise<boolean>;
  releaseClusterLock(name: string): Promise<void>;
  /** LISTEN on a channel of the dedicated connection. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<void>;
  /** Called once when the dedicated connection is lost (every lock with it). */
  onLost(listener: () => void): void;
  /** Called once when the connection is open again after a loss (invariant 3a). */
  onRestored(listener: () => void): void;
  /** Whether the dedicated connection is open now (false while it is being re-opened after a loss). */
  connected(): boolean;
  close(): Promise<void>;
}

/** A lease as it was taken, with what the bump read of the conversation at that moment. */
export interface AcquiredLease extends OwnerLease {
  status: ConversationStatus;
  agentId: string | null;
}

/**
 * Invariant 6: $1 lock key, $2 node, $3 tenant, $4 conversation. `ok` whether the lock was taken;
 * the conversation's columns when the bump happened.
 */
const ACQUIRE_SQL = `WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok),
  b AS (
    UPDATE conversations SET owner_epoch = owner_epoch + 1, owner_node = $2
    WHERE tenant_id = $3 AND id = $4 AND (SELECT ok FROM l)
    RETURNING owner_epoch, status, agent_id
  )
SELECT l.ok, b.owner_epoch::text AS owner_epoch, b.status, b.agent_id FROM l LEFT JOIN b ON true`;

/** Invariant 3a: the first retry after a failed re-open, and the longest wait between two. */
const RECONNECT_FIRST_DELAY_MS = 100;
export const RECONNECT_MAX_DELAY_MS = 2000;

export function createOwnership(deps: { pool: pg.Pool; node: string; logger: Logger }): Ownership {
  let client: pg.Client | null = null;
  let opening: Promise<pg.Client> | null = null;
  let closing = false;
  /** Invariant 3a: the pending retry after a failed re-open, the error it failed with, the outage. */
  let retry: NodeJS.Timeout | null = null;
  let retryDelay = RECONNECT_FIRST_DELAY_MS;
  let lastError: Error | null = null;
  let outage: { since: number; attempts: number } | null = null;
  const held = new Set<string>();
  const acquiring = new Set<string>();
  const lostListeners: (() => void)[] = [];
  const restoredListeners: (() => void)[] = [];
  const channels = new Map<string, (payload: string) => void>();

  // One statement at a time on the dedicated connection, whoever calls: pg would queue
  // concurrent calls itself, but that is deprecated (a DeprecationWarning on the terminal at
  // shutdown, when the servers release together) and goes away in pg 9
  // (conversations.ownership-serial.test.ts).
  let tail: Promise<unknown> = Promise.resolve();
  const query = <R extends pg.QueryResultRow>(
    c: pg.Client,
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> => {
    const run = tail.then(() => c.query<R>(text, values));
    tail = run.catch(() => {});
    return run;
  };

  const connect = async (): Promise<pg.Client> => {
    // biome-ignore lint/suspicious/noExplicitAny: pg.Pool keeps its connection options on `options`, untyped
    const options = (deps.pool as any).options as pg.ClientConfig;
    const c = new pg.Client({ ...options, keepAlive: true });
    // Only the established connection's drop is a loss: a connection that never opened held
    // nothing, and its error already rejects the attempt (invariant 3a).
    const onDrop = (err?: Error) => {
      if (closing || client !== c) return;
      held.clear();
      client = null;
      deps.logger.error(
        { err: err?.message },
        'conversation ownership connection lost: stopping owned conversations',
      );
      outage = { since: performance.now(), attempts: 0 };
      for (const l of lostListeners) l();
      reopen();
    };
    c.on('error', onDrop);
    c.on('end', () => onDrop());
    c.on('notification', (msg) => {
      const handler = channels.get(msg.channel);
      if (handler && msg.payload !== undefined) handler(msg.payload);
    });
    try {
      await c.connect();
      for (const channel of channels.keys()) await query(c, `LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      await c.end().catch(() => {});
      throw err;
    }
    if (closing) {
      await c.end().catch(() => {});
      throw new Error('the ownership connection is closed (the process is stopping)');
    }
    client = c;
    return c;
  };

  /** Invariant 3a: the database answered again after a loss. */
  const restored = (since: { since: number; attempts: number }): void => {
    outage = null;
    retryDelay = RECONNECT_FIRST_DELAY_MS;
    lastError = null;
    deps.logger.info(
      { downMs: Math.round(performance.now() - since.since), attempts: since.attempts },
      'conversation ownership connection re-established',
    );
    for (const l of restoredListeners) l();
  };

  /** Invariant 3a: an attempt after a loss failed; the next one waits, twice as long each time. */
  const retryLater = (since: { attempts: number }, err: unknown): void => {
    lastError = err instanceof Error ? err : new Error(String(err));
    if (since.attempts === 1) {
      deps.logger.warn(
        { err: { code: (lastError as { code?: unknown }).code, message: lastError.message } },
        `cannot re-open the conversation ownership connection: retrying, at most ${RECONNECT_MAX_DELAY_MS / 1000} s apart`,
      );
    }
    retry = setTimeout(() => {
      retry = null;
      reopen();
    }, retryDelay);
    retry.unref();
    retryDelay = Math.min(retryDelay * 2, RECONNECT_MAX_DELAY_MS);
  };

  // One attempt at a time, whoever asks. During an outage every attempt, a caller's too, ends
  // in either the recovery or the next scheduled retry, settled before `opening` is cleared.
  const open = (): Promise<pg.Client> => {
    if (opening) return opening;
    const during = outage;
    if (during) during.attempts++;
    opening = connect().then(
      (c) => {
        opening = null;
        if (during) restored(during);
        return c;
      },
      (err: unknown) => {
        opening = null;
        if (during && !closing) retryLater(during, err);
        throw err;
      },
    );
    return opening;
  };

  /** Invariant 3a: after a loss, an attempt now unless one is under way or waiting. */
  const reopen = (): void => {
    if (closing || client || opening || retry) return;
    open().catch(() => {
      // A failed attempt scheduled the next one (retryLater).
    });
  };

  const conn = async (): Promise<pg.Client> => {
    if (client) return client;
    if (closing) throw new Error('the ownership connection is closed (the process is stopping)');
    // Re-opening after a loss (invariant 3a): wait for the attempt under way, or fail at once
    // with the last attempt's error while the next one waits.
    if (retry && lastError) throw lastError;
    return await open();
  };

  const acquire = async (tenantId: string, conversationId: string): Promise<AcquiredLease | null> => {
    const c = await conn();
    const key = LOCK_NAMESPACE + conversationId;
    const unlock = () => query(c, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]);
    let row:
      | {
          ok: boolean;
          owner_epoch: string | null;
          status: ConversationStatus | null;
          agent_id: string | null;
        }
      | undefined;
    try {
      row = (await query<NonNullable<typeof row>>(c, ACQUIRE_SQL, [key, deps.node, tenantId, conversationId]))
        .rows[0];
    } catch (err) {
      // Whether the lock was taken is unknown: unlocking one not held is a no-op (and a warning).
      await unlock().catch(() => {});
      throw err;
    }
    if (!row?.ok) return null;
    if (row.owner_epoch === null || row.status === null) {
      await unlock();
      return null;
    }
    held.add(conversationId);
    return { tenantId, conversationId, epoch: row.owner_epoch, status: row.status, agentId: row.agent_id };
  };

  return {
    async open() {
      await conn();
    },

    async tryAcquire(tenantId, conversationId) {
      // Session advisory locks are re-entrant on one connection: two concurrent attempts of
      // this process (a command and the orphan sweep) would both succeed and count the lock
      // twice, so one release would not free it. One attempt per conversation at a time.
      if (held.has(conversationId) || acquiring.has(conversationId)) return null;
      acquiring.add(conversationId);
      try {
        return await acquire(tenantId, conversationId);
      } finally {
        acquiring.delete(conversationId);
      }
    },

    async release(conversationId) {
      if (!held.delete(conversationId)) return;
      const c = client;
      if (!c) return;
      await query(c, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [
        LOCK_NAMESPACE + conversationId,
      ]).catch(() => {
        // The connection is going away: the lock goes with it.
      });
    },

    holds: (conversationId) => held.has(conversationId),

    async isOwned(conversationId) {
      const res = await deps.pool.query<{ owned: boolean }>(
        `SELECT hashtextextended($1, 0) IN (${HELD_LOCK_KEYS}) AS owned`,
        [LOCK_NAMESPACE + conversationId],
      );
      return res.rows[0]?.owned === true;
    },

    async tryClusterLock(name) {
      const c = await conn();
      const got = await query<{ ok: boolean }>(
        c,
        'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok',
        [`paddock:cluster:${name}`],
      );
      return got.rows[0]?.ok === true;
    },

    async releaseClusterLock(name) {
      const c = client;
      if (!c) return;
      await query(c, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [`paddock:cluster:${name}`]).catch(
        () => {},
      );
    },

    async listen(channel, onPayload) {
      channels.set(channel, onPayload);
      const c = await conn();
      await query(c, `LISTEN ${pg.escapeIdentifier(channel)}`);
    },

    onLost(listener) {
      lostListeners.push(listener);
    },

    onRestored(listener) {
      restoredListeners.push(listener);
    },

    connected: () => client !== null,

    async close() {
      closing = true;
      if (retry) clearTimeout(retry);
      retry = null;
      held.clear();
      const c = client ?? (opening ? await opening.catch(() => null) : null);
      client = null;
      opening = null;
      await c?.end().catch(() => {});
    },
  };
}
