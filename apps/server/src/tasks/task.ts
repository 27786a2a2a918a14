// What a release task is (`paddock-server task <name> [args]`): the registry in tasks.ts lists
// them, each domain defines its own (accounts.tasks.ts, rotate-master-key.task.ts) against this.
import type { Deps } from '../deps.ts';

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

export class TaskUsageError extends Error {}
