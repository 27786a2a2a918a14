// The crontab: every job of SCHEDULED_JOBS (schedule.ts) as a graphile-worker cron item and
// the task handler it fires. graphile-worker schedules each (identifier, timestamp) once
// across every runner sharing the database (its `known_crontabs` row is claimed in the
// statement that enqueues), so every replica runs the same crontab and a job fires once per
// schedule. Times are UTC (graphile-worker's cron is UTC only).
//
// The missed-run rule (docs/upkeep.md): a run missed while no replica ran (downtime, a long
// rollout) fires once when the first replica comes back, if it was due less than one interval
// of its job ago (the shortest gap between two of its scheduled runs, less a minute, so at most
// one missed run is in reach). A run missed longer ago is dropped: the job's next run does its
// work, since every job works from its `now` and acts on all that is due by then.
//
// A job runs once per attempt (maxAttempts 1): a failed run is logged and counted, and the next
// schedule runs it again; a retry minutes later would repeat what failed (a backend that is down).
// One job_key per job: a run that is still waiting when the next is due is replaced by it.
import {
  type CronItem,
  type ParsedCronItem,
  parseCronItem,
  parseCronItems,
  type TaskList,
} from 'graphile-worker';
import type { Deps } from '../deps.ts';
import { runScheduledJob } from './run-job.ts';
import type { ScheduledJob } from './scheduled-job.ts';

const MINUTE_MS = 60_000;
/** Far enough to see two runs of a monthly job. */
const SCAN_MINUTES = 62 * 24 * 60;

/** How far back a missed run of this crontab is still run: its shortest interval less a minute. */
export function backfillMs(crontab: string): number {
  const { match } = parseCronItem({ task: 'scan', match: crontab });
  let previous: number | null = null;
  let shortest = Number.POSITIVE_INFINITY;
  const start = Date.UTC(2026, 0, 1);
  for (let i = 0; i < SCAN_MINUTES; i++) {
    const ts = new Date(start + i * MINUTE_MS);
    const digest = {
      min: ts.getUTCMinutes(),
      hour: ts.getUTCHours(),
      date: ts.getUTCDate(),
      month: ts.getUTCMonth() + 1,
      dow: ts.getUTCDay(),
    };
    if (!match(digest)) continue;
    if (previous !== null) shortest = Math.min(shortest, i - previous);
    previous = i;
  }
  return Number.isFinite(shortest) ? (shortest - 1) * MINUTE_MS : 0;
}

/** The graphile-worker task identifier a scheduled job runs under. */
export const cronTaskName = (job: ScheduledJob): string => `upkeep:${job.name}`;

export function cronItems(jobs: readonly ScheduledJob[]): ParsedCronItem[] {
  const items: CronItem[] = jobs.map((job) => ({
    task: cronTaskName(job),
    match: job.crontab,
    identifier: cronTaskName(job),
    options: {
      backfillPeriod: backfillMs(job.crontab),
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
