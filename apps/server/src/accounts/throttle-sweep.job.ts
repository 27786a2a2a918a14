// The throttle sweep (every 10 minutes): the account throttles kept in PostgreSQL
// (throttles.repo.ts) delete their own stale rows only when the same address comes back, so
// rows of addresses that never return would stay forever. This deletes them: sign-in failure
// windows that ended (LOGIN_FAILURE_WINDOW_SECONDS) and mail sends older than the hour.
// Bounded batches; safe twice and beside itself (SKIP LOCKED). The per-IP request limit is in
// memory per process and has nothing here.
import type { JobRunContext, ScheduledJob } from '../jobs/scheduled-job.ts';
import { countThrottleRows, sweepThrottleRows } from './throttles.repo.ts';

const BATCH = 5000;
const MAIL_WINDOW_MS = 3_600_000;

export const throttleSweepJob: ScheduledJob = {
  name: 'throttle-sweep',
  description: 'Deletes sign-in failure and mail throttle rows that count for nobody any more',
  crontab: '*/10 * * * *',
  async run({ deps, now, dryRun, print }: JobRunContext) {
    const windowMs = deps.config.rateLimit.loginFailureWindowSeconds * 1000;
    const sweeps = [
      { table: 'login_failures', what: 'ended sign-in failure windows', cutoff: now.getTime() - windowMs },
      { table: 'mail_sends', what: 'mail sends older than an hour', cutoff: now.getTime() - MAIL_WINDOW_MS },
    ] as const;
    let acted = 0;
    const parts: string[] = [];
    for (const sweep of sweeps) {
      const cutoff = new Date(sweep.cutoff);
      let n = 0;
      if (dryRun) n = await countThrottleRows(deps.db, sweep.table, cutoff);
      else {
        for (;;) {
          const batch = await sweepThrottleRows(deps.db, sweep.table, cutoff, BATCH);
          n += batch;
          if (batch < BATCH) break;
        }
      }
      acted += n;
      parts.push(`${n} ${sweep.what}`);
      print(`${dryRun ? 'would delete' : 'deleted'} ${n} ${sweep.what}`);
    }
    return { acted, failures: 0, summary: `${dryRun ? 'would delete' : 'deleted'} ${parts.join(', ')}` };
  },
};
