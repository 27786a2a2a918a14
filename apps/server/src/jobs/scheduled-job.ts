// What a scheduled job is: upkeep that graphile-worker's crontab fires once per schedule
// across all replicas (UTC), and that `paddock-server task <name> [--dry-run]` runs now.
// Each domain defines its jobs against this shape; schedule.ts lists them.
// What must hold for every job:
// - Idempotent and safe to run twice (a crash mid-run, a task beside the cron run).
// - Time comes from `now` only, so tests drive the job with a chosen instant.
// - `dryRun` changes nothing and reports what a real run would do.
// - `print` gets one line per item acted on (the task prints it, the cron run logs it).
import type { Config } from '../config/config.ts';
import type { Deps } from '../deps.ts';

export interface JobRunContext {
  deps: Deps;
  now: Date;
  dryRun: boolean;
  print(line: string): void;
}

export interface JobResult {
  /** Items acted on (destroyed, deleted, freed, ...); with dryRun, items that would be. */
  acted: number;
  /** Items that failed; the run goes on past them. */
  failures: number;
  /** One line for the log and the task's last output, e.g. "deleted 1,204 log events". */
  summary: string;
}

export interface ScheduledJob {
  /** kebab-case; also the release task's name (`paddock-server task <name>`). */
  name: string;
  description: string;
  /** graphile-worker crontab time fields, UTC: e.g. '7 * * * *' (hourly at :07). */
  crontab: string;
  /** Whether the crontab holds the job under this configuration (default: always). */
  scheduled?(config: Config): boolean;
  run(ctx: JobRunContext): Promise<JobResult>;
}
