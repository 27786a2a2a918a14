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
// 7. Owner leases (issue 39, deliverable 2): a hung owner (SIGSTOP, a frozen VM) keeps its
//    connection, so its locks, open; the lease bounds how long. At every connect the process
//    registers its node in owner_nodes with the dedicated connection's backend (pid and start
//    time) and a lease of leaseSeconds, and renews it every third of that with ONE statement on
//    that connection, whatever the number of conversations. fenceExpired (run by every replica's
//    orphan probe, lifecycle.ts) takes the rows whose lease ran out (another node's, never its
//    own) in one statement that deletes them and bumps the epoch of every conversation they
//    last took (so the hung owner's writes fail from then on), and only then ends their
//    ownership backend (pg_terminate_backend: the database role may end its own backends, no
//    superuser needed), which frees every lock; the orphan adoption that follows takes the
//    conversations with a new epoch. Two replicas fencing at once fence once (the DELETE takes
//    each row once; the other finds nothing). A woken owner writes nothing: its writes fail on
//    the epoch, its connection is gone (onLost stops every server), and a renewal that finds
//    its row gone ends the connection itself (so a fence whose terminate did not work still
//    frees the locks once the owner wakes). Bound: lease + the probe interval. isOwned counts a
//    lock whose holder's lease expired as no owner (the viewers' owner_lost). Test:
//    conversations.hung-owner.test.ts.
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

/** OWNER_LEASE_SECONDS (config.ts): how long a hung owner keeps its conversations. */
export const DEFAULT_LEASE_SECONDS = 30;

/** A node fenced by fenceExpired: its pending/running conversations (their viewers see owner_lost). */
export interface FencedNode {
  node: string;
  conversations: { tenantId: string; conversationId: string }[];
}

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
  /**
   * Invariant 7: fences every other node whose lease expired; `beforeTerminate` runs after the
   * epochs were bumped and before the backends are ended (the engine tells the viewers).
   */
  fenceExpired(beforeTerminate?: (fenced: FencedNode[]) => void): Promise<FencedNode[]>;
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

/** Invariant 7: $1 node, $2 lease seconds. Registers (or re-registers) this connection's backend. */
const REGISTER_SQL = `INSERT INTO owner_nodes (node, backend_pid, backend_start, lease_until, renewed_at)
  SELECT $1, pid, backend_start, now() + make_interval(secs => $2), now()
  FROM pg_stat_activity WHERE pid = pg_backend_pid()
  ON CONFLICT (node) DO UPDATE SET backend_pid = EXCLUDED.backend_pid,
    backend_start = EXCLUDED.backend_start, lease_until = EXCLUDED.lease_until, renewed_at = now()`;

/** Invariant 7: $1 node, $2 lease seconds. No row: this node was fenced. */
const RENEW_SQL = `UPDATE owner_nodes SET lease_until = now() + make_interval(secs => $2), renewed_at = now()
  WHERE node = $1 AND backend_pid = pg_backend_pid() RETURNING 1 AS ok`;

/**
 * Invariant 7: $1 this node. Takes the expired rows of other nodes and bumps the epoch of the
 * conversations they took last, in one statement (committed before any backend is ended).
 */
const FENCE_SQL = `WITH fenced AS (
    DELETE FROM owner_nodes WHERE lease_until < now() AND node <> $1
    RETURNING node, backend_pid, backend_start
  ),
  bumped AS (
    UPDATE conversations c SET owner_epoch = c.owner_epoch + 1
    FROM fenced f WHERE c.owner_node = f.node
    RETURNING c.tenant_id, c.id, c.status, f.node
  )
SELECT f.node, f.backend_pid, f.backend_start::text AS backend_start,
  coalesce((SELECT json_agg(json_build_array(b.tenant_id, b.id)) FROM bumped b
    WHERE b.node = f.node AND b.status IN ('pending', 'running')), '[]'::json) AS live
FROM fenced f`;

/**
 * Invariant 7: $1 pid, $2 backend start. Ends that backend if it is still the one registered (a
 * pid may have been reused), waiting up to 5 s for it to exit so that its locks are free.
 */
const TERMINATE_SQL = `SELECT pg_terminate_backend(pid, 5000) AS ended FROM pg_stat_activity
  WHERE pid = $1 AND backend_start = $2::timestamptz`;

/**
 * Invariant 7: a held lock counts as no owner when its holder is a registered node whose lease
 * expired (a lock held by a connection that is no node, as in tests, still counts).
 */
const LEASE_EXPIRED_HOLDER = `EXISTS (SELECT 1 FROM owner_nodes n
  WHERE n.backend_pid = l.pid AND n.lease_until < now()
    AND n.backend_start = (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = l.pid))`;

/** Invariant 7: how long a stopping process waits for its lease row's removal. */
const CLOSE_DELETE_TIMEOUT_MS = 2000;

/** Invariant 3a: the first retry after a failed re-open, and the longest wait between two. */
const RECONNECT_FIRST_DELAY_MS = 100;
export const RECONNECT_MAX_DELAY_MS = 2000;

export function createOwnership(deps: {
  pool: pg.Pool;
  node: string;
  logger: Logger;
  /** Invariant 7 (default DEFAULT_LEASE_SECONDS). */
  leaseSeconds?: number;
}): Ownership {
  const leaseSeconds = deps.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  let client: pg.Client | null = null;
  /** Invariant 7: the renewal timer, and the current connection's drop (a fenced renewal calls it). */
  let renewal: NodeJS.Timeout | null = null;
  let dropCurrent: ((err: Error) => void) | null = null;
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
    dropCurrent = (err) => {
      onDrop(err);
      void c.end().catch(() => {});
    };
    c.on('notification', (msg) => {
      const handler = channels.get(msg.channel);
      if (handler && msg.payload !== undefined) handler(msg.payload);
    });
    try {
      await c.connect();
      await query(c, REGISTER_SQL, [deps.node, leaseSeconds]);
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
    startRenewal();
    return c;
  };

  /** Invariant 7: renew every third of the lease; a renewal that finds no row was fenced. */
  const renew = async (): Promise<void> => {
    const c = client;
    if (!c || closing) return;
    let renewed: boolean;
    try {
      renewed = (await query<{ ok: number }>(c, RENEW_SQL, [deps.node, leaseSeconds])).rowCount === 1;
    } catch (err) {
      // A dropped connection is its own error handler's to report; anything else is news.
      if (client === c && !closing)
        deps.logger.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'renewing the conversation ownership lease failed',
        );
      return;
    }
    if (renewed || client !== c || closing) return;
    deps.logger.error(
      { node: deps.node },
      'conversation ownership lease was fenced by another replica (this process was unresponsive past its lease)',
    );
    dropCurrent?.(new Error('the ownership lease expired and another replica fenced it'));
  };

  const startRenewal = (): void => {
    if (renewal) return;
    renewal = setInterval(() => void renew(), (leaseSeconds * 1000) / 3);
    renewal.unref();
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
      // Invariant 7: a lock whose holder's lease expired is no owner.
      const res = await deps.pool.query<{ owned: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM pg_locks l
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended($1, 0)
             AND NOT ${LEASE_EXPIRED_HOLDER}) AS owned`,
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

    async fenceExpired(beforeTerminate) {
      const res = await deps.pool.query<{
        node: string;
        backend_pid: number;
        backend_start: string;
        live: [string, string][];
      }>(FENCE_SQL, [deps.node]);
      const fenced = res.rows.map((r) => ({
        node: r.node,
        conversations: r.live.map(([tenantId, conversationId]) => ({ tenantId, conversationId })),
      }));
      if (fenced.length === 0) return fenced;
      beforeTerminate?.(fenced);
      for (const row of res.rows) {
        const live = fenced.find((f) => f.node === row.node)?.conversations.length ?? 0;
        let hung: boolean;
        try {
          const ended = await deps.pool.query<{ ended: boolean }>(TERMINATE_SQL, [
            row.backend_pid,
            row.backend_start,
          ]);
          hung = ended.rows[0]?.ended === true;
        } catch (err) {
          // Another database role's backend (permission denied): its epochs are bumped already,
          // and its next renewal, once it wakes, finds its row gone and frees the locks itself.
          deps.logger.warn(
            { node: row.node, conversations: live, err: err instanceof Error ? err.message : String(err) },
            'fenced a conversation owner whose lease expired, but could not end its ownership connection: its conversations are adopted once it lets go',
          );
          continue;
        }
        // A node that died (kill -9) left its row: removing it is routine. A hung one is news.
        deps.logger[hung || live > 0 ? 'warn' : 'info'](
          { node: row.node, conversations: live, ownershipConnectionEnded: hung },
          hung
            ? 'fenced a conversation owner whose lease expired (unresponsive): its conversations are adopted'
            : 'removed the expired lease of a conversation owner that is gone',
        );
      }
      return fenced;
    },

    async close() {
      closing = true;
      if (retry) clearTimeout(retry);
      retry = null;
      if (renewal) clearInterval(renewal);
      renewal = null;
      held.clear();
      const c = client ?? (opening ? await opening.catch(() => null) : null);
      client = null;
      opening = null;
      // A clean stop leaves no lease behind for another replica to fence; a database that does
      // not answer does not hold the stop up (the lease then runs out by itself).
      if (c) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          query(c, 'DELETE FROM owner_nodes WHERE node = $1 AND backend_pid = pg_backend_pid()', [
            deps.node,
          ]).catch(() => {}),
          new Promise((r) => {
            timer = setTimeout(r, CLOSE_DELETE_TIMEOUT_MS);
          }),
        ]);
        clearTimeout(timer);
      }
      await c?.end().catch(() => {});
    },
  };
}
