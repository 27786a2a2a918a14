// Backend destroys that are never dropped: when the backend does not confirm a sandbox's destroy
// (down, restarting, timing out), the name is kept in `sandbox_destroys` and the lifecycle clock
// retries it until the backend confirms, so a passing failure never leaves a sandbox running that
// no conversation will use again (terminate, delete, reclaim, a failed provisioning, a checkpoint
// build).
//
// What must hold (conversations.destroy-queue.test.ts):
// 1. `destroy` never throws: the backend confirmed the destroy (a 404 counts: nothing is left),
//    or the name is queued, committed before it returns (only a database that fails too loses it,
//    and that is logged).
// 2. A queued name is deleted only after a destroy the backend confirmed, and every confirmed
//    destroy deletes its name's row, whoever queued it. A name can be queued ahead, due later:
//    a conversation's delete queues its live sandboxes in the statement that deletes it
//    (conversations.repo.ts deleteConversation), and a checkpoint build queues its sandbox before
//    creating it, due after the longest build (`owe`), so a process that dies before its destroy
//    leaves the destroy owed, not forgotten (no row names those sandboxes any more, or ever).
// 3. Each retry claims its rows by moving their `next_at` forward (1 minute, doubling per attempt,
//    at most 64 minutes whatever the attempt count) in the statement that selects them (FOR
//    UPDATE SKIP LOCKED): processes sharing the database never retry one name at the same moment,
//    and a name that keeps failing does not cost the backend a call every minute.
// 4. The queue holds names, never secrets; the error kept is the client's message about the
//    destroy call (a name and a status), and no retry gives up: the row stays until the backend
//    confirms, visible in the log with its attempt count.
import type { SandboxClient } from '@paddock/sandbox-client';
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Logger } from '../../observability/logger.ts';

/** Due rows retried per call (a lifecycle tick). */
const RETRIES_PER_TICK = 20;
const MAX_ERROR_LENGTH = 500;
/** 1 minute doubled at most this often: 64 minutes between tries (and no interval overflow). */
const MAX_BACKOFF_DOUBLINGS = 6;

export interface DestroyQueue {
  /** Destroys `name` on the backend; if that is not confirmed, queues it (invariant 1). True when confirmed. */
  destroy(tenantId: string, name: string): Promise<boolean>;
  /**
   * Queues `name` ahead, due in `dueInMs`: a sandbox about to be created that no row will name
   * (a checkpoint build's), destroyed then if its creator died before it could (invariant 2).
   */
  owe(tenantId: string, name: string, dueInMs: number): Promise<void>;
  /** Retries the queued destroys that are due (the lifecycle clock's tick). */
  retryDue(): Promise<void>;
}

const message = (err: unknown): string =>
  (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR_LENGTH);

export function createDestroyQueue(deps: {
  db: Db;
  sandbox: Pick<SandboxClient, 'destroy'>;
  logger: Logger;
}): DestroyQueue {
  const { db, sandbox, logger } = deps;

  /** Invariant 2: the backend confirmed; a row left behind only costs a retry that finds nothing. */
  const forget = async (name: string): Promise<void> => {
    await db
      .deleteFrom('sandbox_destroys')
      .where('name', '=', name)
      .execute()
      .catch((err: unknown) =>
        logger.warn({ sandbox: name, err: message(err) }, 'could not clear a queued destroy'),
      );
  };

  const queue = async (tenantId: string, name: string, err: unknown): Promise<void> => {
    try {
      await db
        .insertInto('sandbox_destroys')
        .values({ name, tenant_id: tenantId, last_error: message(err) })
        .onConflict((oc) => oc.column('name').doUpdateSet({ last_error: message(err) }))
        .execute();
      logger.warn({ sandbox: name, err: message(err) }, 'sandbox destroy failed; queued for a retry');
    } catch (dbErr) {
      logger.error(
        { sandbox: name, err: message(err), dbErr: message(dbErr) },
        'sandbox destroy failed and could not be queued for a retry: the sandbox may be left running',
      );
    }
  };

  return {
    async destroy(tenantId, name) {
      try {
        await sandbox.destroy(name, { retry: true });
      } catch (err) {
        await queue(tenantId, name, err);
        return false;
      }
      await forget(name);
      return true;
    },

    async owe(tenantId, name, dueInMs) {
      await db
        .insertInto('sandbox_destroys')
        .values({
          name,
          tenant_id: tenantId,
          next_at: sql<Date>`now() + ${Math.max(0, Math.round(dueInMs))} * interval '1 millisecond'`,
        })
        .onConflict((oc) => oc.column('name').doNothing())
        .execute();
    },

    async retryDue() {
      const claimed = await sql<{ name: string; attempts: number }>`
        UPDATE sandbox_destroys
           SET attempts = attempts + 1,
               next_at = now() + interval '1 minute' * power(2, least(attempts, ${MAX_BACKOFF_DOUBLINGS}))
         WHERE name IN (SELECT name FROM sandbox_destroys WHERE next_at <= now()
                         ORDER BY next_at LIMIT ${RETRIES_PER_TICK} FOR UPDATE SKIP LOCKED)
        RETURNING name, attempts`.execute(db);
      for (const row of claimed.rows) {
        try {
          await sandbox.destroy(row.name, { retry: true });
        } catch (err) {
          await db
            .updateTable('sandbox_destroys')
            .set({ last_error: message(err) })
            .where('name', '=', row.name)
            .execute();
          logger.warn(
            { sandbox: row.name, attempts: row.attempts, err: message(err) },
            'sandbox destroy retry failed; it is retried later',
          );
          continue;
        }
        await forget(row.name);
        logger.info({ sandbox: row.name, attempts: row.attempts }, 'queued sandbox destroy done');
      }
    },
  };
}
