// One run of a scheduled job, whoever started it (the crontab or `paddock-server task`): the
// same log line and the same metrics either way.
// What must hold:
// - One log line per run with the job, the outcome, the duration, the items acted on and the
//   failures; a run that throws is logged and counted as failed, then rethrown (the crontab's
//   job then fails in graphile-worker, which retries it; the task exits non-zero).
// - `print` lines reach the caller as they come (the task prints them); the cron run logs them.
import type { Deps } from '../deps.ts';
import type { JobResult, ScheduledJob } from './scheduled-job.ts';

export async function runScheduledJob(
  job: ScheduledJob,
  ctx: { deps: Deps; now: Date; dryRun: boolean; print(line: string): void; trigger: 'cron' | 'task' },
): Promise<JobResult> {
  const { deps, now, dryRun, print, trigger } = ctx;
  const log = deps.logger.child({ component: 'jobs', job: job.name });
  const { metrics } = deps;
  const t0 = performance.now();
  let result: JobResult;
  try {
    result = await job.run({ deps, now, dryRun, print });
  } catch (err) {
    const seconds = (performance.now() - t0) / 1000;
    metrics.jobDuration.observe({ job: job.name }, seconds);
    metrics.jobRuns.inc({ job: job.name, outcome: 'failed' });
    metrics.jobFailures.inc({ job: job.name });
    log.error(
      { trigger, dryRun, durationMs: Math.round(seconds * 1000), err },
      `scheduled job ${job.name} failed`,
    );
    throw err;
  }
  const seconds = (performance.now() - t0) / 1000;
  metrics.jobDuration.observe({ job: job.name }, seconds);
  metrics.jobRuns.inc({ job: job.name, outcome: result.failures > 0 ? 'failed' : 'ok' });
  if (!dryRun) metrics.jobItems.inc({ job: job.name }, result.acted);
  if (result.failures > 0) metrics.jobFailures.inc({ job: job.name }, result.failures);
  const fields = {
    trigger,
    dryRun,
    durationMs: Math.round(seconds * 1000),
    acted: result.acted,
    failures: result.failures,
  };
  if (result.failures > 0) log.warn(fields, `${job.name}: ${result.summary}`);
  else log.info(fields, `${job.name}: ${result.summary}`);
  return result;
}
