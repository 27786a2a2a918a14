// The trial sweeper (06:17 UTC daily, only with BILLING_ENABLED; `paddock-server task
// trial-sweeper [--dry-run]`): backstops `trialing` rows that no webhook will move. The gate
// already refuses an expired trial against the local clock (billing/gate.ts); the sweeper
// sends the mails and settles the row. What must hold (test/billing.sweeper.test.ts):
// - A trial ending within 3 days gets the trial-ending mail once (trial_ending_notified_at).
// - An expired trial gets the trial-expired mail once (trial_expired_notified_at). Without a
//   subscription of record (a local trial: no processor event will ever end it) its status
//   becomes `canceled`; with one, the processor owns the status and the row keeps it.
// - Each row is marked in the transaction that enqueues its mail, rows locked with SKIP LOCKED:
//   two sweeps at once (a task beside the cron run) mail each account once between them.
// - Time comes from `now`; a dry run changes nothing and counts what a run would do.
import { sql } from 'kysely';
import type { ScheduledJob } from '../jobs/scheduled-job.ts';
import { enqueueBillingMails } from './billing-mail.ts';

const DAY_MS = 24 * 60 * 60 * 1000;
/** The trial-ending mail goes this long before the trial ends (spec: 3 days before). */
export const TRIAL_ENDING_NOTICE_MS = 3 * DAY_MS;
const BATCH = 200;

export const trialSweeperJob: ScheduledJob = {
  name: 'trial-sweeper',
  description:
    'Mails trials ending within 3 days and expired trials (once each); an expired trial without a subscription becomes canceled',
  crontab: '17 6 * * *',
  scheduled: (config) => config.billing.enabled,
  async run({ deps, now, dryRun, print }) {
    if (!deps.config.billing.enabled) {
      return { acted: 0, failures: 0, summary: 'disabled (BILLING_ENABLED is false)' };
    }
    const log = deps.logger.child({ component: 'billing' });
    const endingBy = new Date(now.getTime() + TRIAL_ENDING_NOTICE_MS);
    let ending = 0;
    let expired = 0;

    if (dryRun) {
      const count = async (expiredRows: boolean) => {
        let q = deps.db
          .selectFrom('billing_accounts')
          .select(sql<string>`count(*)`.as('n'))
          .where('status', '=', 'trialing');
        q = expiredRows
          ? q.where('trial_ends_at', '<=', now).where('trial_expired_notified_at', 'is', null)
          : q
              .where('trial_ends_at', '>', now)
              .where('trial_ends_at', '<=', endingBy)
              .where('trial_ending_notified_at', 'is', null);
        return Number((await q.executeTakeFirstOrThrow()).n);
      };
      ending = await count(false);
      expired = await count(true);
      return {
        acted: ending + expired,
        failures: 0,
        summary: `would mail ${ending} ending and ${expired} expired trials`,
      };
    }

    for (;;) {
      const batch = await deps.db.transaction().execute(async (trx) => {
        const rows = await sql<{ user_id: string; trial_ends_at: Date }>`
          UPDATE billing_accounts SET trial_ending_notified_at = ${now}, updated_at = now()
          WHERE user_id IN (
            SELECT user_id FROM billing_accounts
            WHERE status = 'trialing' AND trial_ends_at > ${now} AND trial_ends_at <= ${endingBy}
              AND trial_ending_notified_at IS NULL
            ORDER BY trial_ends_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
          RETURNING user_id, trial_ends_at`.execute(trx);
        for (const row of rows.rows) {
          await enqueueBillingMails(trx, { mailQueue: deps.mailQueue, logger: log }, row.user_id, [
            'trial_ending',
          ]);
          print(
            `trial ending mail for account ${row.user_id} (trial ends ${row.trial_ends_at.toISOString()})`,
          );
        }
        return rows.rows.length;
      });
      ending += batch;
      if (batch < BATCH) break;
    }

    for (;;) {
      const batch = await deps.db.transaction().execute(async (trx) => {
        const rows = await sql<{ user_id: string; status: string }>`
          UPDATE billing_accounts
          SET trial_expired_notified_at = ${now}, updated_at = now(),
              status = CASE WHEN subscription_id IS NULL THEN 'canceled' ELSE status END
          WHERE user_id IN (
            SELECT user_id FROM billing_accounts
            WHERE status = 'trialing' AND trial_ends_at <= ${now} AND trial_expired_notified_at IS NULL
            ORDER BY trial_ends_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
          RETURNING user_id, status`.execute(trx);
        for (const row of rows.rows) {
          await enqueueBillingMails(trx, { mailQueue: deps.mailQueue, logger: log }, row.user_id, [
            'trial_expired',
          ]);
          print(`trial expired mail for account ${row.user_id} (now ${row.status})`);
        }
        return rows.rows.length;
      });
      expired += batch;
      if (batch < BATCH) break;
    }

    return {
      acted: ending + expired,
      failures: 0,
      summary: `mailed ${ending} ending and ${expired} expired trials`,
    };
  },
};
