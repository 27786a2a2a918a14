// Release tasks: `paddock-server task <name> [args]`, run against the configured
// database without HTTP. Each task is idempotent and prints what it did.
import { promoteAdminTask, verifyEmailTask } from '../accounts/accounts.tasks.ts';
import type { Deps } from '../deps.ts';
import { rotateMasterKeyTask } from '../secrets/rotate-master-key.task.ts';

export interface TaskContext {
  deps: Deps;
  args: string[];
  print(line: string): void;
}

export interface Task {
  description: string;
  usage: string;
  run(ctx: TaskContext): Promise<void>;
}

export const TASKS: Record<string, Task> = {
  'verify-email': verifyEmailTask,
  'promote-admin': promoteAdminTask,
  'rotate-master-key': rotateMasterKeyTask,
};

export class TaskUsageError extends Error {}
