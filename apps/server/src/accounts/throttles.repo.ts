// All SQL of the account throttles (issue 14): failed sign-ins per email address and
// capped account mails per recipient. Addresses are keyed by the SHA-256 of their
// lower-cased form, so neither table holds an address, and a registered and an unknown
// address take exactly the same path.
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

export function addressKey(email: string): Buffer {
  return createHash('sha256').update(email.trim().toLowerCase(), 'utf8').digest();
}

/** Seconds until `email` may try again, or 0 when it is not blocked. */
export async function loginBlockedForSeconds(
  db: Db,
  email: string,
  opts: { max: number; windowSeconds: number },
): Promise<number> {
  const row = await db
    .selectFrom('login_failures')
    .select(
      sql<number>`ceil(extract(epoch FROM window_started_at + make_interval(secs => ${opts.windowSeconds}) - now()))`.as(
        'remaining',
      ),
    )
    .where('email_key', '=', addressKey(email))
    .where('failures', '>=', opts.max)
    .executeTakeFirst();
  const remaining = Number(row?.remaining ?? 0);
  return remaining > 0 ? remaining : 0;
}

/** Counts one failed sign-in; a window that has ended starts over at 1. */
export async function recordLoginFailure(db: Db, email: string, windowSeconds: number): Promise<void> {
  // Ended windows count for nobody: the table holds only addresses failing right now.
  await db
    .deleteFrom('login_failures')
    .where('window_started_at', '<=', sql<Date>`now() - make_interval(secs => ${windowSeconds})`)
    .execute();
  await sql`
    INSERT INTO login_failures (email_key, failures, window_started_at)
    VALUES (${addressKey(email)}, 1, now())
    ON CONFLICT (email_key) DO UPDATE SET
      failures = CASE
        WHEN login_failures.window_started_at + make_interval(secs => ${windowSeconds}) <= now() THEN 1
        ELSE login_failures.failures + 1 END,
      window_started_at = CASE
        WHEN login_failures.window_started_at + make_interval(secs => ${windowSeconds}) <= now() THEN now()
        ELSE login_failures.window_started_at END`.execute(db);
}

export async function clearLoginFailures(db: Db, email: string): Promise<void> {
  await db.deleteFrom('login_failures').where('email_key', '=', addressKey(email)).execute();
}

/**
 * Claims one of `perHour` send slots of the rolling hour for `recipient`; false when they
 * are used up. Serialized per recipient by a transaction-scoped advisory lock, so
 * concurrent job runners never claim more than the cap between them.
 */
export async function claimMailSlot(db: Db, recipient: string, perHour: number): Promise<boolean> {
  const key = addressKey(recipient);
  return await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${key.toString('hex')}, 14))`.execute(trx);
    // Rows older than the hour count for nobody: the table holds at most an hour of mail.
    await trx.deleteFrom('mail_sends').where('sent_at', '<=', sql<Date>`now() - interval '1 hour'`).execute();
    const { count } = await trx
      .selectFrom('mail_sends')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('recipient_key', '=', key)
      .executeTakeFirstOrThrow();
    if (Number(count) >= perHour) return false;
    await trx.insertInto('mail_sends').values({ recipient_key: key }).execute();
    return true;
  });
}

/**
 * The throttle sweep (throttle-sweep.job.ts): deletes up to `limit` rows that count for nobody
 * at `now` (sign-in failure windows that ended, mail sends older than the hour), oldest first;
 * the caller repeats until it returns 0, so no statement holds a long lock.
 */
export async function sweepThrottleRows(
  db: Db,
  table: 'login_failures' | 'mail_sends',
  cutoff: Date,
  limit: number,
): Promise<number> {
  const res =
    table === 'login_failures'
      ? await sql`DELETE FROM login_failures WHERE email_key IN (
          SELECT email_key FROM login_failures WHERE window_started_at <= ${cutoff}
           ORDER BY window_started_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)`.execute(db)
      : await sql`DELETE FROM mail_sends WHERE id IN (
          SELECT id FROM mail_sends WHERE sent_at <= ${cutoff}
           ORDER BY sent_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)`.execute(db);
  return Number(res.numAffectedRows ?? 0n);
}

/** What sweepThrottleRows would delete at `cutoff` (the sweep's dry run). */
export async function countThrottleRows(
  db: Db,
  table: 'login_failures' | 'mail_sends',
  cutoff: Date,
): Promise<number> {
  const column = table === 'login_failures' ? 'window_started_at' : 'sent_at';
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE ${sql.ref(column)} <= ${cutoff}`.execute(db);
  return rows[0]?.n ?? 0;
}
