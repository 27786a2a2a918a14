// The crontab: every job of SCHEDULED_JOBS (schedule.ts) as a graphile-worker cron item and
// the task handler it fires. graphile-worker schedules each (identifier, timestamp) once
// across every runner sharing the database (its `known_crontabs` row is claimed in the
// statement that enqueues), so every replica runs the same crontab and a job fires once per
// schedule. Times are UTC (graphile-worker's cron is UTC only).
//
// The missed-run rule (docs/upkeep.md): a run missed while no replica ran (downtime, a long
// rollout) fires once when the first replica comes back, if it was due within the last
// BACKFILL_MS; several missed runs of one job collapse into that one run (one job_key per
// job), because every job works from its `now`, so one late run does all that the missed
// ones would have. A run missed longer ago is dropped: the next scheduled run covers it.
import { type CronItem, type ParsedCronItem, parseCronItems, type TaskList } from 'graphile-worker';
import type { Deps } from '../deps.ts';
import { runScheduledJob } from './run-job.ts';
import type { ScheduledJob } from './scheduled-job.ts';

export const BACKFILL_MS = 24 * 3_600_000;

/** The graphile-worker task identifier a scheduled job runs under. */
export const cronTaskName = (job: ScheduledJob): string => `upkeep:${job.name}`;

export function cronItems(jobs: readonly ScheduledJob[]): ParsedCronItem[] {
  const items: CronItem[] = jobs.map((job) => ({
    task: cronTaskName(job),
    match: job.crontab,
    identifier: cronTaskName(job),
    // One attempt: a failed run is logged and counted; the next schedule runs it again, and a
    // retry minutes later would only repeat what failed (a backend that is down, a bad row).
    options: {
      backfillPeriod: BACKFILL_MS,
      jobKey: cronTaskName(job),
      jobKeyMode: 'replace',
      maxAttempts: 1,
    },
  }));
  return parseCronItems(items);
}

export function cronTasks(jobs: readonly ScheduledJob[], deps: Deps): TaskList {
  const log = deps.logger.child({ component: 'jobs' });
  const tasks: TaskList = {};
  for (const job of jobs) {
    tasks[cronTaskName(job)] = async () => {
      await runScheduledJob(job, {
        deps,
        now: new Date(),
        dryRun: false,
        print: (line) => log.info({ job: job.name }, line),
        trigger: 'cron',
      });
    };
  }
  return tasks;
}
