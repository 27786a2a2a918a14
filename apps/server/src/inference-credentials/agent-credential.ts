// Whether an agent's turns will find a key for its provider, before a conversation starts: the
// console warns on agent creation (the agent's fields, before it exists) and on "Start
// conversation" (the agent) instead of a turn failing with exit 2. A key comes from the account's credential, the agent's environment (a variable or a secret)
// or the conversation's vault (a secret), as the sandbox env is built (provisioning/env-file.ts).
// Names only: no value is read. Every read is tenant-scoped; another tenant's vault is a missing one.

import type { Runtime } from '../agents/agents.tables.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { type InferenceProvider, PROVIDER_SPECS, runtimeProvider } from './providers.ts';

export type CredentialSource = 'account' | 'environment' | 'vault';

export interface AgentCredential {
  /** Null when the agent's model names another provider (opencode): nothing can be told. */
  provider: InferenceProvider | null;
  /** The variable the runtime reads the key from. */
  key_var: string | null;
  /** Where the key comes from; null: nowhere, so the agent's turns fail at once. */
  source: CredentialSource | null;
}

export async function agentCredential(
  db: Db,
  tenantId: string,
  agent: { runtime: Runtime; model: string; environment_id: string | null },
  vaultId: string | null,
): Promise<AgentCredential> {
  if (vaultId !== null) {
    const vault = await db
      .selectFrom('vaults')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', vaultId)
      .executeTakeFirst();
    if (!vault) throw AppError.notFound('vault');
  }
  const provider = runtimeProvider(agent.runtime, agent.model);
  if (provider === null) return { provider, key_var: null, source: null };
  const keyVar = PROVIDER_SPECS[provider].keyVar;
  const found = (source: CredentialSource | null): AgentCredential => ({ provider, key_var: keyVar, source });
  if (agent.environment_id !== null) {
    const environment = await db
      .selectFrom('environments')
      .select('env_vars')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', agent.environment_id)
      .executeTakeFirst();
    if (!environment) throw AppError.notFound('environment');
    if (Object.hasOwn(environment.env_vars, keyVar)) return found('environment');
  }
  const scopes = [agent.environment_id, vaultId].filter((id): id is string => id !== null);
  const secrets =
    scopes.length === 0
      ? []
      : await db
          .selectFrom('secrets')
          .select(['environment_id', 'vault_id'])
          .where('tenant_id', '=', tenantId)
          .where('key', '=', keyVar)
          .where((eb) =>
            eb.or([
              ...(agent.environment_id !== null ? [eb('environment_id', '=', agent.environment_id)] : []),
              ...(vaultId !== null ? [eb('vault_id', '=', vaultId)] : []),
            ]),
          )
          .execute();
  if (secrets.some((s) => s.environment_id !== null)) return found('environment');
  if (secrets.length > 0) return found('vault');
  const account = await db
    .selectFrom('inference_credentials')
    .select('provider')
    .where('tenant_id', '=', tenantId)
    .where('provider', '=', provider)
    .executeTakeFirst();
  return found(account ? 'account' : null);
}
