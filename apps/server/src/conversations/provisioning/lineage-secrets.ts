// The secret values of a conversation's lineage: those its sandbox is given (its agent's
// environment secrets, its vault's secrets) and those of every conversation above it. A
// sub-conversation is made from its parent's output (its prompt, the parent's writes), so what
// the parent's redactor hides must stay hidden in the child too (issue 35, finding 4): the
// child's title and prompt are redacted with these values when a sandbox key starts it
// (conversations.service.ts), and its log redactor registers them (env-file.ts).
//
// What must hold (sandbox-key.http.test.ts, "a parent's secret values redact its child's
// title, prompt and log"):
// - Tenant-scoped: every row read is the tenant's; an agent deleted since contributes its vault
//   only.
// - The values live in memory only, like the registry they are registered with.
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';

export interface LineageDeps {
  db: Db;
  secrets: Pick<SecretsService, 'decryptOwner'>;
}

/**
 * The environment and vault secret values of `conversationId` (unless `self` is false) and of
 * each of its ancestors, every owner decrypted once.
 */
export async function lineageSecretValues(
  deps: LineageDeps,
  tenantId: string,
  conversationId: string,
  options: { self: boolean },
): Promise<string[]> {
  const rows = await sql<{ environment_id: string | null; vault_id: string | null }>`
    WITH RECURSIVE up(id, parent, agent_id, vault_id, depth) AS (
      SELECT id, parent_conversation_id, agent_id, vault_id, 0 FROM conversations
        WHERE tenant_id = ${tenantId} AND id = ${conversationId}
      UNION ALL
      SELECT c.id, c.parent_conversation_id, c.agent_id, c.vault_id, up.depth + 1
        FROM conversations c JOIN up ON c.id = up.parent
        WHERE c.tenant_id = ${tenantId}
    )
    SELECT a.environment_id, up.vault_id FROM up
      LEFT JOIN agents a ON a.tenant_id = ${tenantId} AND a.id = up.agent_id
      WHERE up.depth >= ${options.self ? 0 : 1}`.execute(deps.db);
  const environments = new Set<string>();
  const vaults = new Set<string>();
  for (const row of rows.rows) {
    if (row.environment_id) environments.add(row.environment_id);
    if (row.vault_id) vaults.add(row.vault_id);
  }
  // One owner after the other: `deps.db` may be a transaction (one connection).
  const owners = [
    ...[...environments].map((id) => ({ kind: 'environment' as const, id })),
    ...[...vaults].map((id) => ({ kind: 'vault' as const, id })),
  ];
  const values: string[] = [];
  for (const owner of owners)
    values.push(...Object.values(await deps.secrets.decryptOwner(tenantId, owner, deps.db)));
  return values;
}
