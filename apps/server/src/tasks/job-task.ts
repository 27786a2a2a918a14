// Every scheduled job as a release task: `paddock-server task <job> [--dry-run]` runs it now,
// beside a running server (the job is idempotent and safe beside its own cron run), prints a
// line per item it acted on, then the run's summary. A run with failures throws, so the task
// exits non-zero and a release pipeline sees it.
import { runScheduledJob } from '../jobs/run-job.ts';
import type { ScheduledJob } from '../jobs/scheduled-job.ts';
import { type Task, TaskUsageError } from './task.ts';

export function jobTask(job: ScheduledJob): Task {
  return {
    description: `${job.description} (scheduled ${job.crontab} UTC)`,
    usage: `${job.name} [--dry-run]`,
    async run({ deps, args, print }) {
      const unknown = args.filter((a) => a !== '--dry-run');
      if (unknown.length > 0) throw new TaskUsageError(`unknown argument "${unknown[0]}"`);
      const dryRun = args.includes('--dry-run');
      const result = await runScheduledJob(job, { deps, now: new Date(), dryRun, print, trigger: 'task' });
      print(`${dryRun ? 'dry run: ' : ''}${result.summary}`);
      if (result.failures > 0) throw new Error(`${job.name}: ${result.failures} item(s) failed (see above)`);
    },
  };
}
