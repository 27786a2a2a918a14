// The unverified-account pruner (05:41 UTC daily; `paddock-server task unverified-prune`):
// accounts never verified UNVERIFIED_PRUNE_AFTER_DAYS after registering are deleted through
// the one deletion path (account-deletion.ts). What must hold (test/accounts.unverified-prune.test.ts):
// - An account registered exactly the bound ago or earlier goes; one registered later stays.
//   The bound comes from `now` only; the deletion re-checks it, and that the account is still
//   unverified, on the locked row, so a verification racing the run wins.
// - UNVERIFIED_PRUNE_AFTER_DAYS=0 disables the job; an address in UNVERIFIED_PRUNE_EXEMPT
//   (case-insensitive) is never pruned.
// - One account failing does not stop the run; printed lines name account ids, never an email.
import { sql } from 'kysely';
import type { ScheduledJob } from '../jobs/scheduled-job.ts';

const DAY_MS = 24 * 60 * 60 * 1000;
const BATCH = 100;

export const unverifiedPruneJob: ScheduledJob = {
  name: 'unverified-prune',
  description:
    'Deletes accounts never verified UNVERIFIED_PRUNE_AFTER_DAYS after registering (0 disables), except UNVERIFIED_PRUNE_EXEMPT',
  crontab: '41 5 * * *',
  async run({ deps, now, dryRun, print }) {
    const { afterDays, exempt } = deps.config.unverifiedPrune;
    if (afterDays === 0) {
      return { acted: 0, failures: 0, summary: 'disabled (UNVERIFIED_PRUNE_AFTER_DAYS=0)' };
    }
    const registeredBy = new Date(now.getTime() - afterDays * DAY_MS);
    let acted = 0;
    let failures = 0;
    let after: { createdAt: Date; id: string } | null = null;
    for (;;) {
      let query = deps.db
        .selectFrom('users')
        .select(['id', 'created_at'])
        .where('email_verified_at', 'is', null)
        .where('created_at', '<=', registeredBy);
      if (exempt.length > 0) query = query.where(sql<string>`lower(email::text)`, 'not in', exempt);
      if (after) {
        const { createdAt, id } = after;
        query = query.where(sql<boolean>`(created_at, id) > (${createdAt}, ${id})`);
      }
      const batch = await query.orderBy('created_at').orderBy('id').limit(BATCH).execute();
      for (const row of batch) {
        const registered = row.created_at.toISOString();
        if (dryRun) {
          print(`would delete unverified account ${row.id} (registered ${registered})`);
          acted++;
          continue;
        }
        try {
          if (await deps.accountDeletion.deleteUnverified(row.id, registeredBy)) {
            print(`deleted unverified account ${row.id} (registered ${registered})`);
            acted++;
          }
        } catch (err) {
          failures++;
          const reason = err instanceof Error ? err.message : String(err);
          print(`failed to delete unverified account ${row.id}: ${reason}`);
        }
      }
      const last = batch.at(-1);
      if (!last || batch.length < BATCH) break;
      after = { createdAt: last.created_at, id: last.id };
    }
    const noun = acted === 1 ? 'account' : 'accounts';
    const summary = `${dryRun ? 'would delete' : 'deleted'} ${acted} unverified ${noun} registered by ${registeredBy.toISOString()}${failures > 0 ? `; ${failures} failed` : ''}`;
    return { acted, failures, summary };
  },
};
