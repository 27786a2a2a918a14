// Release tasks of the accounts domain: the escape hatches when mail is down.
//   paddock-server task verify-email <email>
//   paddock-server task promote-admin <email>
// Both are idempotent; state changes are audited (user.email_verified via 'release_task',
// admin.role.granted with a null actor and via 'release_task').
import { AppError } from '../http/errors.ts';
import { type Task, TaskUsageError } from '../tasks/task.ts';

function emailArg(args: string[]): string {
  const [email, ...rest] = args;
  if (!email || rest.length > 0 || !email.includes('@'))
    throw new TaskUsageError('expected one email address');
  return email;
}

async function orNotFound<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AppError && err.code === 'not_found') throw new TaskUsageError(err.message);
    throw err;
  }
}

export const verifyEmailTask: Task = {
  description: 'Mark an account verified (for when mail is down)',
  usage: 'verify-email <email>',
  async run({ deps, args, print }) {
    const email = emailArg(args);
    const result = await orNotFound(() => deps.accounts.verifyEmailByOperator(email));
    print(result === 'verified' ? `verified ${email}` : `${email} was already verified`);
  },
};

export const promoteAdminTask: Task = {
  description: 'Grant the admin role to an account',
  usage: 'promote-admin <email>',
  async run({ deps, args, print }) {
    const email = emailArg(args);
    const result = await orNotFound(() => deps.accounts.promoteAdminByOperator(email));
    print(result === 'granted' ? `granted the admin role to ${email}` : `${email} is already an admin`);
  },
};
