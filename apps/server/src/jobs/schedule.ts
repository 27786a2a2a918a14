// Every scheduled job, in one list: the crontab and the release tasks are built from it.
import { unverifiedPruneJob } from '../accounts/unverified-prune.job.ts';
import type { ScheduledJob } from './scheduled-job.ts';

export const SCHEDULED_JOBS: readonly ScheduledJob[] = [unverifiedPruneJob];
