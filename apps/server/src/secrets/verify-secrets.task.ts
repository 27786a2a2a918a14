// `paddock-server task verify-secrets [--batch-size N]`: unwraps every tenant data key with the
// configured master key(s) and decrypts every environment and vault secret, writing nothing.
// Run after a restore (scripts/restore-drill.sh runs it) or a master key rotation: exit 0 means
// every stored secret is readable with this MASTER_SECRETS_KEY. See src/secrets/INVARIANTS.md (9).
import type { Task } from '../tasks/task.ts';
import { TaskUsageError } from '../tasks/task.ts';

export const verifySecretsTask: Task = {
  description: 'decrypt every tenant key and secret with the configured master key (read only)',
  usage: 'verify-secrets [--batch-size N]',
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
    const report = await deps.secrets.verifyAll({ batchSize });
    print(
      `verified ${report.tenants} tenant key(s) and ${report.secrets} secret(s); ` +
        `${report.tenantsUnreadable} tenant key(s) and ${report.secretsUnreadable} secret(s) unreadable`,
    );
    if (report.tenantsUnreadable > 0 || report.secretsUnreadable > 0) {
      throw new Error(
        `${report.tenantsUnreadable} tenant key(s) cannot be unwrapped and ${report.secretsUnreadable} secret(s) ` +
          'cannot be decrypted with the configured MASTER_SECRETS_KEY (and MASTER_SECRETS_KEY_PREVIOUS): ' +
          'is this the master key of the backup? (docs/operations.md)',
      );
    }
  },
};
