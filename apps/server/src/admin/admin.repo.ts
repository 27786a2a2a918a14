// The SQL of the admin's cross-tenant views: metadata about accounts and conversations only.
// No column holding content (prompts, titles, log data, failure text, secrets, session
// state) is selected here, so no view built on these reads can leak one.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

export interface AccountCounts {
  environments: number;
  vaults: number;
  agents: number;
  conversations: number;
  active_api_keys: number;
}

export async function accountCounts(db: Db, tenantId: string): Promise<AccountCounts> {
  const row = await sql<AccountCounts>`
    SELECT
      (SELECT count(*) FROM environments WHERE tenant_id = ${tenantId})::int AS environments,
      (SELECT count(*) FROM vaults WHERE tenant_id = ${tenantId})::int AS vaults,
      (SELECT count(*) FROM agents WHERE tenant_id = ${tenantId})::int AS agents,
      (SELECT count(*) FROM conversations WHERE tenant_id = ${tenantId})::int AS conversations,
      (SELECT count(*) FROM api_keys WHERE user_id = ${tenantId} AND revoked_at IS NULL
         AND (expires_at IS NULL OR expires_at > now()))::int AS active_api_keys`.execute(db);
  return row.rows[0]!;
}

export async function lastActivity(db: Db, tenantId: string): Promise<Date | null> {
  const row = await db
    .selectFrom('conversations')
    .select((eb) => eb.fn.max('last_activity_at').as('at'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return (row?.at as Date | null | undefined) ?? null;
}

const CONVERSATION_METADATA = [
  'conversations.id',
  'conversations.tenant_id',
  'conversations.agent_id',
  'conversations.vault_id',
  'conversations.status',
  'conversations.source',
  'conversations.parent_conversation_id',
  'conversations.log_bytes',
  'conversations.log_truncated',
  'conversations.created_at',
  'conversations.last_activity_at',
] as const;

function conversationQuery(db: Db) {
  return db
    .selectFrom('conversations')
    .leftJoin('agents', 'agents.id', 'conversations.agent_id')
    .select([
      ...CONVERSATION_METADATA,
      'agents.name as agent_name',
      'agents.runtime as runtime',
      (eb) =>
        eb
          .selectFrom('turns')
          .select((t) => t.fn.countAll<number>().as('n'))
          .whereRef('turns.conversation_id', '=', 'conversations.id')
          .as('turn_count'),
    ]);
}

export type ConversationMetadataRow = Awaited<
  ReturnType<ReturnType<typeof conversationQuery>['execute']>
>[number];

/** A tenant's conversations, newest first (ids are UUIDv7: time-ordered). */
export async function listConversationMetadata(
  db: Db,
  tenantId: string,
  opts: { limit: number; beforeId?: string },
): Promise<ConversationMetadataRow[]> {
  let q = conversationQuery(db).where('conversations.tenant_id', '=', tenantId);
  if (opts.beforeId) q = q.where('conversations.id', '<', opts.beforeId);
  return await q.orderBy('conversations.id', 'desc').limit(opts.limit).execute();
}

export async function findConversationMetadata(
  db: Db,
  id: string,
): Promise<ConversationMetadataRow | undefined> {
  return await conversationQuery(db).where('conversations.id', '=', id).executeTakeFirst();
}

export async function turnMetadata(db: Db, conversationId: string) {
  return await db
    .selectFrom('turns')
    .select(['seq', 'status', 'exit_code', 'usage', 'created_at', 'started_at', 'ended_at'])
    .where('conversation_id', '=', conversationId)
    .orderBy('seq', 'asc')
    .execute();
}

export async function latestSandboxMetadata(db: Db, conversationId: string) {
  return await db
    .selectFrom('sandboxes')
    .select(['status', 'created_at', 'ready_at', 'ended_at'])
    .where('conversation_id', '=', conversationId)
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
}
