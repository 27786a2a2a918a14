// The subscription gate: how the conversation gates (conversations/api/gates.ts, gate 3, on
// start, on each turn and on reattach) read billing_accounts. Only wired with BILLING_ENABLED.
// What must hold (test/billing.gate.test.ts, the matrix through the public API):
// 1. `active` and `comped` pass; `trialing` passes while trial_ends_at is ahead on the LOCAL
//    clock (the database's now(), never the processor's word), so trial expiry holds while the
//    processor is down or its webhooks are late.
// 2. `past_due` and `canceled` are refused: 402 subscription_required with upgrade_url =
//    PUBLIC_URL + /account/billing. Reads (lists, logs, streams) never pass this gate.
// 3. No row: the account predates billing on this instance (registration with billing on
//    writes its row in the registration transaction) and passes as legacy until
//    `task expire-legacy-trials` starts its clock. A legacy row with no trial end passes too.
// 4. A trialing row with no trial end that is not legacy fails closed.
import type { SubscriptionGate } from '../conversations/api/gates.ts';
import type { Db } from '../db/database.ts';
import { findGateState } from './billing.repo.ts';

export function billingPageUrl(publicUrl: URL): string {
  return new URL('/account/billing', publicUrl.origin).toString();
}

export function createSubscriptionGate(deps: { db: Db; publicUrl: URL }): SubscriptionGate {
  const refusal = { upgradeUrl: billingPageUrl(deps.publicUrl) };
  return async (tenantId) => {
    const row = await findGateState(deps.db, tenantId);
    if (!row) return null;
    switch (row.status) {
      case 'active':
      case 'comped':
        return null;
      case 'trialing':
        if (row.trial_ends_at === null) return row.legacy ? null : refusal;
        return row.trial_live ? null : refusal;
      default:
        return refusal;
    }
  };
}
