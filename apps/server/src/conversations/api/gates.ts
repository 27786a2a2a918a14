// The gates a conversation passes before any sandbox work, in the spec's order (Life of a
// conversation, 1): the agent exists and is the caller's → the vault is on the agent's
// allowlist → the subscription gate → the concurrent-sandbox quota → suspended accounts.
//
// What must hold (conversations.gates.test.ts, conversations.quota.test.ts):
// 1. The order above: a request failing two gates gets the earlier gate's refusal.
// 2. The quota check and the row insert are atomic per user: admit() runs inside the caller's
//    transaction after lockForAdmission took the user row FOR UPDATE, so concurrent starts of
//    one user are serialized and 20 parallel starts against a quota of 5 admit exactly 5.
//    Live sandboxes (pending, starting, ready) count from the start of provisioning.
// 3. The subscription and suspension gates run again before every turn and on reattach
//    (continuation()), so an account suspended or lapsed mid-conversation stops there.
import type { Transaction } from 'kysely';
import { findAgent } from '../../agents/agents.repo.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { AppError } from '../../http/errors.ts';
import { isUuid } from '../../resources/fields.ts';
import type { TurnGates } from '../contracts.ts';
import { lockForAdmission } from './conversations.repo.ts';

/** Seconds a caller refused by the quota should wait before trying again. */
export const QUOTA_RETRY_AFTER_SECONDS = 30;

/**
 * The subscription gate: null when the tenant may start work, else where to upgrade. The
 * billing issue supplies the real one; while billing is off every tenant passes.
 */
export type SubscriptionGate = (tenantId: string) => Promise<{ upgradeUrl: string } | null>;

export const billingOffGate: SubscriptionGate = async () => null;

/** Every gate; the two a turn passes again (TurnGates) are named in contracts.ts for the engine. */
export interface Gates extends TurnGates {
  /** Gate 2: 422 vault_not_allowed unless the vault is on the agent's allowlist. */
  vault(tenantId: string, agentId: string, vaultId: string): Promise<void>;
  /** Gate 3: 402 subscription_required with upgrade_url. */
  subscription(tenantId: string): Promise<void>;
  /**
   * Gates 4 and 5 inside the admitting transaction: takes the per-user lock, then refuses with
   * 429 sandbox_quota_exceeded (when a new sandbox is needed) or 403 account_suspended.
   */
  admit(
    trx: Transaction<Database>,
    tenantId: string,
    options: {
      newSandbox: boolean;
      /**
       * Whether the user is suspended, when the caller read it already in this transaction (a
       * prompt, with the conversation's lock); with no new sandbox nothing else is needed.
       */
      suspended?: boolean;
    },
  ): Promise<void>;
}

export function createGates(deps: {
  db: Db;
  maxSandboxesPerUser: number;
  subscription?: SubscriptionGate;
}): Gates {
  const subscriptionGate = deps.subscription ?? billingOffGate;

  const subscription = async (tenantId: string) => {
    const refusal = await subscriptionGate(tenantId);
    if (refusal)
      throw new AppError('subscription_required', 'an active subscription is required to start work', {
        extra: { upgrade_url: refusal.upgradeUrl },
      });
  };

  const suspended = () => new AppError('account_suspended', 'this account is suspended');

  return {
    async agent(tenantId, agentId) {
      const row = isUuid(agentId) ? await findAgent(deps.db, tenantId, agentId) : undefined;
      if (!row) throw AppError.notFound('agent');
      return {
        id: row.id,
        name: row.name,
        runtime: row.runtime,
        model: row.model,
        system: row.system,
        skills: row.skills,
        mcpServers: row.mcp_servers,
        environmentId: row.environment_id,
      };
    },

    async vault(tenantId, agentId, vaultId) {
      const allowed =
        isUuid(vaultId) &&
        (await deps.db
          .selectFrom('agent_vaults')
          .select('vault_id')
          .where('tenant_id', '=', tenantId)
          .where('agent_id', '=', agentId)
          .where('vault_id', '=', vaultId)
          .executeTakeFirst()) !== undefined;
      if (!allowed) throw new AppError('vault_not_allowed', "the vault is not on the agent's allowlist");
    },

    subscription,

    async admit(trx, tenantId, options) {
      if (!options.newSandbox && options.suspended !== undefined) {
        if (options.suspended) throw suspended();
        return;
      }
      const state = await lockForAdmission(trx, tenantId);
      if (options.newSandbox && state.liveSandboxes >= deps.maxSandboxesPerUser) {
        throw new AppError(
          'sandbox_quota_exceeded',
          `at most ${deps.maxSandboxesPerUser} ${deps.maxSandboxesPerUser === 1 ? 'sandbox' : 'sandboxes'} may run at once per user; terminate one or wait`,
          {
            headers: { 'retry-after': String(QUOTA_RETRY_AFTER_SECONDS) },
            extra: { limit: deps.maxSandboxesPerUser },
          },
        );
      }
      if (!state.exists || state.suspended) throw suspended();
    },

    async continuation(tenantId) {
      await subscription(tenantId);
      const user = await deps.db
        .selectFrom('users')
        .select('suspended_at')
        .where('id', '=', tenantId)
        .executeTakeFirst();
      if (!user || user.suspended_at !== null) throw suspended();
    },
  };
}
