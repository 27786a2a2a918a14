// Release tasks: `paddock-server task <name> [args]`, run against the configured
// database without HTTP. Each task is idempotent and prints what it did. Every scheduled
// job (jobs/schedule.ts) is one too, under its own name (job-task.ts).
import { promoteAdminTask, verifyEmailTask } from '../accounts/accounts.tasks.ts';
import { expireLegacyTrialsTask } from '../billing/legacy-trials.task.ts';
import { SCHEDULED_JOBS } from '../jobs/schedule.ts';
import { rotateMasterKeyTask } from '../secrets/rotate-master-key.task.ts';
import { verifySecretsTask } from '../secrets/verify-secrets.task.ts';
import { jobTask } from './job-task.ts';
import type { Task } from './task.ts';

export const TASKS: Record<string, Task> = {
  'verify-email': verifyEmailTask,
  'promote-admin': promoteAdminTask,
  'rotate-master-key': rotateMasterKeyTask,
  'verify-secrets': verifySecretsTask,
  'expire-legacy-trials': expireLegacyTrialsTask,
  ...Object.fromEntries(SCHEDULED_JOBS.map((job) => [job.name, jobTask(job)])),
};
