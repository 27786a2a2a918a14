// `paddock-server task rotate-master-key [--batch-size N]`: rewraps every tenant data key
// wrapped by MASTER_SECRETS_KEY_PREVIOUS with MASTER_SECRETS_KEY. Idempotent; one
// transaction per tenant; see src/secrets/INVARIANTS.md (7) and docs/secrets.md.
import type { Task } from '../tasks/task.ts';
import { TaskUsageError } from '../tasks/task.ts';

export const rotateMasterKeyTask: Task = {
  description: 'rewrap every tenant data key from MASTER_SECRETS_KEY_PREVIOUS to MASTER_SECRETS_KEY',
  usage: 'rotate-master-key [--batch-size N]',
  async run({ deps, args, print }) {
    let batchSize = 100;
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (arg === '--batch-size') {
        const n = Number(args[++i]);
        if (!Number.isInteger(n) || n < 1 || n > 10_000)
          throw new TaskUsageError('--batch-size must be an integer from 1 to 10000');
        batchSize = n;
      } else {
        throw new TaskUsageError(`unknown argument "${arg}"`);
      }
    }
    if (!deps.config.masterSecretsKeyPrevious) {
      print(
        'MASTER_SECRETS_KEY_PREVIOUS is not set: only keys already wrapped by MASTER_SECRETS_KEY can be read.',
      );
    }
    const report = await deps.secrets.rotateMasterKey({
      batchSize,
      onBatch: (r) => print(`... ${r.rewrapped} rewrapped so far`),
    });
    print(
      `rewrapped ${report.rewrapped} tenant key(s); ${report.unmatched} wrapped by an unknown key (left untouched)`,
    );
    if (report.unmatched > 0) {
      throw new Error(
        `${report.unmatched} tenant key(s) are wrapped by neither MASTER_SECRETS_KEY nor MASTER_SECRETS_KEY_PREVIOUS`,
      );
    }
  },
};
