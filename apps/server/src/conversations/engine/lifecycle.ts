// The lifecycle clock: every tick (a minute by default; injectable) each process checks the
// conversations it owns and adopts the orphans nobody owns.
//
// What must hold (conversations.lifecycle.test.ts):
// 1. Idle timeout (SANDBOX_IDLE_TIMEOUT_MINUTES since last_activity_at) and max lifetime
//    (SANDBOX_MAX_LIFETIME_HOURS since the sandbox's creation) destroy an idle warm sandbox:
//    stage `sandbox`, sandbox row `terminated`, the conversation stays `idle` and resumable.
//    0 disables either bound. A busy server (turn running, provisioning) is not reclaimed for
//    idleness.
// 2. The provision deadline (30 minutes by default; injectable) is measured from the live
//    sandbox row's creation: past it the rows are failed first, then the stuck work stopped.
// 3. Orphans: a conversation with a live sandbox or an open turn that no process owns is
//    taken over by the first process whose orphan probe (every ORPHAN_PROBE_MS, also in each
//    tick and the boot sweep) finds it: within seconds of its owner's death (test: "another
//    replica owns it within 5 s", conversations.takeover.test.ts). The probe reads which
//    conversations are locked from pg_locks in the same statement, so it tries only true
//    orphans: a conversation another process owns costs no lock attempt and no NOTIFY.
// 3a. Hung owners (owner.ts invariant 7): before looking for orphans the probe fences every
//    other node whose lease expired (its epochs bumped, its ownership backend ended, so its
//    locks are free): the same sweep then adopts its conversations. A hung owner is so replaced
//    within its lease plus one probe interval (test: conversations.hung-owner.test.ts).
// 4. Every tick also retries the backend destroys that failed (destroy-queue.ts), whatever the
//    conversations: a sandbox whose destroy failed is gone once the backend confirms one.
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Logger } from '../../observability/logger.ts';
import type { ConversationServer } from './conversation-server.ts';
import { HELD_LOCK_KEYS, LOCK_NAMESPACE } from './owner.ts';

export interface LifecycleOptions {
  tickMs: number;
  idleTimeoutMinutes: number;
  maxLifetimeHours: number;
  provisionDeadlineMs: number;
  /** How often every process looks for orphans (default ORPHAN_PROBE_MS). */
  orphanProbeMs?: number;
}

export const DEFAULT_TICK_MS = 60_000;
export const ORPHAN_PROBE_MS = 2_000;
export const DEFAULT_PROVISION_DEADLINE_MS = 30 * 60_000;
const ORPHANS_PER_TICK = 100;

export interface LifecycleClock {
  start(): void;
  /** One pass now (tests and the boot sweep). */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

export function createLifecycleClock(deps: {
  db: Db;
  logger: Logger;
  options: LifecycleOptions;
  servers(): ConversationServer[];
  /** True while a tick could do nothing (the ownership connection is being re-opened): it is skipped. */
  paused?(): boolean;
  /** Fence the nodes whose lease expired (owner.ts invariant 7), before the orphans are read. */
  fenceExpired?(): Promise<unknown>;
  /** Try to take over an orphan and start its server. */
  adopt(tenantId: string, conversationId: string): Promise<void>;
  /** Retry the backend destroys that failed (destroy-queue.ts). */
  retryDestroys(): Promise<void>;
}): LifecycleClock {
  const { db, options } = deps;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;

  const checkOwned = async () => {
    const servers = deps.servers();
    if (servers.length === 0) return;
    const rows = await db
      .selectFrom('conversations as c')
      .innerJoin('sandboxes as s', (j) =>
        j.onRef('s.conversation_id', '=', 'c.id').on('s.status', 'in', ['pending', 'starting', 'ready']),
      )
      .select([
        'c.id',
        'c.status',
        's.status as sandbox_status',
        sql<number>`extract(epoch from now() - c.last_activity_at) * 1000`.as('idle_ms'),
        sql<number>`extract(epoch from now() - s.created_at) * 1000`.as('age_ms'),
      ])
      .where(
        'c.id',
        'in',
        servers.map((s) => s.lease.conversationId),
      )
      .execute();
    const byId = new Map(servers.map((s) => [s.lease.conversationId, s]));
    for (const row of rows) {
      const server = byId.get(row.id);
      if (!server) continue;
      const age = Number(row.age_ms);
      if (row.sandbox_status !== 'ready') {
        if (age > options.provisionDeadlineMs) {
          await server.failProvisioning(
            `provisioning did not finish within ${Math.round(options.provisionDeadlineMs / 60_000)} minutes`,
          );
        }
        continue;
      }
      if (server.busy() || row.status !== 'idle') continue;
      if (options.maxLifetimeHours > 0 && age > options.maxLifetimeHours * 3_600_000) {
        await server.reclaim(
          `the sandbox reached its maximum lifetime of ${options.maxLifetimeHours} ${options.maxLifetimeHours === 1 ? 'hour' : 'hours'}`,
        );
      } else if (
        options.idleTimeoutMinutes > 0 &&
        Number(row.idle_ms) > options.idleTimeoutMinutes * 60_000
      ) {
        await server.reclaim(
          `the sandbox was idle for ${options.idleTimeoutMinutes} ${options.idleTimeoutMinutes === 1 ? 'minute' : 'minutes'}`,
        );
      }
    }
  };

  const sweepOrphans = async () => {
    // Invariant 3a: a failed fence must not keep the true orphans from being adopted.
    await deps
      .fenceExpired?.()
      .catch((err: unknown) => deps.logger.error({ err }, 'fencing expired owner leases failed'));
    const owned = new Set(deps.servers().map((s) => s.lease.conversationId));
    const rows = await db
      .selectFrom('conversations as c')
      .select(['c.id', 'c.tenant_id'])
      .where('c.status', 'not in', ['failed'])
      // Only conversations whose lock nobody holds (owner.ts invariant 1), read in this statement.
      .where(
        sql<boolean>`hashtextextended(${LOCK_NAMESPACE} || c.id::text, 0) NOT IN (${sql.raw(HELD_LOCK_KEYS)})`,
      )
      .where((eb) =>
        eb.or([
          eb.exists(
            eb
              .selectFrom('sandboxes as s')
              .select('s.id')
              .whereRef('s.conversation_id', '=', 'c.id')
              .where('s.status', 'in', ['pending', 'starting', 'ready']),
          ),
          eb.exists(
            eb
              .selectFrom('turns as t')
              .select('t.id')
              .whereRef('t.conversation_id', '=', 'c.id')
              .where('t.status', 'in', ['queued', 'running']),
          ),
        ]),
      )
      .orderBy('c.last_activity_at')
      .limit(ORPHANS_PER_TICK)
      .execute();
    for (const row of rows) {
      if (owned.has(row.id)) continue;
      await deps.adopt(row.tenant_id, row.id);
    }
  };

  let probing: Promise<void> | null = null;
  const probe = async () => {
    // Nothing can be adopted while this process's ownership connection is down (engine.ts).
    if (deps.paused?.()) return;
    probing ??= sweepOrphans()
      .catch((err: unknown) => deps.logger.error({ err }, 'looking for orphaned conversations failed'))
      .finally(() => {
        probing = null;
      });
    await probing;
  };

  const tick = async () => {
    if (deps.paused?.()) return;
    running ??= (async () => {
      try {
        await checkOwned();
        await probe();
      } catch (err) {
        deps.logger.error({ err }, 'lifecycle tick failed');
      }
      try {
        await deps.retryDestroys();
      } catch (err) {
        deps.logger.error({ err }, 'retrying the queued sandbox destroys failed');
      }
    })().finally(() => {
      running = null;
    });
    await running;
  };

  let probeTimer: NodeJS.Timeout | null = null;
  return {
    start() {
      if (timer) return;
      timer = setInterval(() => void tick(), options.tickMs);
      timer.unref();
      probeTimer = setInterval(() => void probe(), options.orphanProbeMs ?? ORPHAN_PROBE_MS);
      probeTimer.unref();
    },
    tick,
    async stop() {
      if (timer) clearInterval(timer);
      if (probeTimer) clearInterval(probeTimer);
      timer = null;
      probeTimer = null;
      await running?.catch(() => {});
      await probing;
    },
  };
}
