// Release task: paddock-server task expire-legacy-trials [--dry-run] [--days N]
// Starts the trial clock of every account that predates billing on this instance (no
// billing_accounts row, or a legacy row with no trial end): a trial of N days (default
// BILLING_TRIAL_DAYS) from now, after which the gate (gate.ts) refuses new work like any
// expired trial. Idempotent: an account whose clock runs already is left alone, so a second
// run does nothing. --dry-run prints how many accounts it would start and writes nothing.
// Refused with billing off: a billing-disabled instance carries no trial state.
import { type Task, TaskUsageError } from '../tasks/task.ts';
import { legacyTrialCandidates, startLegacyTrial } from './billing.repo.ts';

function parseArgs(args: string[], fallbackDays: number): { dryRun: boolean; days: number } {
  let dryRun = false;
  let days = fallbackDays;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--dry-run') dryRun = true;
    else if (arg === '--days') {
      const value = args[++i];
      if (!value || !/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 365)
        throw new TaskUsageError('--days needs a whole number of days from 1 to 365');
      days = Number(value);
    } else throw new TaskUsageError(`unknown argument ${JSON.stringify(arg)}`);
  }
  return { dryRun, days };
}

export const expireLegacyTrialsTask: Task = {
  description: 'Start the trial clock of accounts that predate billing (BILLING_ENABLED)',
  usage: 'expire-legacy-trials [--dry-run] [--days N]',
  async run({ deps, args, print }) {
    if (!deps.config.billing.enabled)
      throw new TaskUsageError('billing is not enabled on this instance (BILLING_ENABLED): nothing to do');
    const { dryRun, days } = parseArgs(args, deps.config.billing.trialDays);
    const candidates = await legacyTrialCandidates(deps.db);
    if (dryRun) {
      print(
        `would start a ${days}-day trial for ${candidates.length} legacy account(s) (dry run: nothing written)`,
      );
      return;
    }
    let started = 0;
    for (const c of candidates) {
      if (!(await startLegacyTrial(deps.db, c.user_id, days))) continue;
      started++;
      await deps.audit.record({
        type: 'billing.legacy_trial_started',
        tenantId: c.user_id,
        actor: { kind: 'system', userId: null, apiKeyId: null },
        ip: null,
        metadata: { via: 'release_task', days },
      });
    }
    print(`started a ${days}-day trial for ${started} legacy account(s)`);
  },
};
