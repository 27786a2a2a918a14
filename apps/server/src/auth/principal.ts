import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { hashApiKey } from './api-key.ts';

/** Who is calling. The tenant is the user account: every tenant-scoped query takes tenantId first. */
export interface Principal {
  userId: string;
  tenantId: string;
  email: string;
  isAdmin: boolean;
  via: 'api_key' | 'session';
  apiKeyId: string | null;
  sessionId: string | null;
  scope: 'full' | 'conversation';
  /** Set for conversation-scoped keys (the sandbox callback token). */
  conversationId: string | null;
}

/**
 * Resolves a bearer API key in one query: key by hash, not revoked, not expired, owner
 * verified and not suspended. Anything else is "no principal" (401), never a hint why.
 */
export async function principalFromApiKey(db: Db, key: string): Promise<Principal | null> {
  const row = await db
    .selectFrom('api_keys as k')
    .innerJoin('users as u', 'u.id', 'k.user_id')
    .select(['k.id as key_id', 'k.scope', 'k.conversation_id', 'u.id as user_id', 'u.email', 'u.is_admin'])
    .where('k.key_hash', '=', hashApiKey(key))
    .where('k.revoked_at', 'is', null)
    .where((eb) => eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', sql<Date>`now()`)]))
    .where('u.email_verified_at', 'is not', null)
    .where('u.suspended_at', 'is', null)
    .executeTakeFirst();
  if (!row) return null;
  // last_used_at is advisory: written at most once a minute per key.
  await db
    .updateTable('api_keys')
    .set({ last_used_at: sql<Date>`now()` })
    .where('id', '=', row.key_id)
    .where((eb) =>
      eb.or([
        eb('last_used_at', 'is', null),
        eb('last_used_at', '<', sql<Date>`now() - interval '1 minute'`),
      ]),
    )
    .execute();
  return {
    userId: row.user_id,
    tenantId: row.user_id,
    email: row.email,
    isAdmin: row.is_admin,
    via: 'api_key',
    apiKeyId: row.key_id,
    sessionId: null,
    scope: row.scope,
    conversationId: row.conversation_id,
  };
}
