// Release tasks: `paddock-server task <name> [args]`, run against the configured
// database without HTTP. Each task is idempotent and prints what it did.
import { promoteAdminTask, verifyEmailTask } from '../accounts/accounts.tasks.ts';
import { rotateMasterKeyTask } from '../secrets/rotate-master-key.task.ts';
import type { Task } from './task.ts';

export const TASKS: Record<string, Task> = {
  'verify-email': verifyEmailTask,
  'promote-admin': promoteAdminTask,
  'rotate-master-key': rotateMasterKeyTask,
};
