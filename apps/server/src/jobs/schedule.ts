// Every scheduled job, in one list: the crontab and the release tasks are built from it.
import { pruneExpiredExportsJob } from '../account-exports/account-exports.prune.ts';
import { throttleSweepJob } from '../accounts/throttle-sweep.job.ts';
import { unverifiedPruneJob } from '../accounts/unverified-prune.job.ts';
import { trialSweeperJob } from '../billing/trial-sweeper.job.ts';
import { sandboxReaperJob } from '../conversations/engine/sandbox-reaper.job.ts';
import { retentionPruneJob } from '../upkeep/retention.job.ts';
import type { ScheduledJob } from './scheduled-job.ts';

export const SCHEDULED_JOBS: readonly ScheduledJob[] = [
  sandboxReaperJob,
  retentionPruneJob,
  unverifiedPruneJob,
  throttleSweepJob,
  pruneExpiredExportsJob,
  trialSweeperJob,
];
