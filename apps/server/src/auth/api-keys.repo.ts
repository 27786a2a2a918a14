// All SQL of API keys. Tenant (user) id first; only key hashes are stored.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../db/database.ts';

export interface ApiKeyRow {
  id: string;
  name: string;
  prefix: string;
  scope: 'full' | 'conversation';
  conversation_id: string | null;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
}

const COLUMNS = [
  'id',
  'name',
  'prefix',
  'scope',
  'conversation_id',
  'created_at',
  'last_used_at',
  'expires_at',
] as const;

export async function insertApiKey(
  db: Db,
  userId: string,
  values: {
    name: string;
    prefix: string;
    hash: Buffer;
    scope: 'full' | 'conversation';
    conversationId: string | null;
    expiresAt: Date | null;
  },
): Promise<ApiKeyRow> {
  return await db
    .insertInto('api_keys')
    .values({
      id: uuidv7(),
      user_id: userId,
      name: values.name,
      prefix: values.prefix,
      key_hash: values.hash,
      scope: values.scope,
      conversation_id: values.conversationId,
      expires_at: values.expiresAt,
    })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
}

/** Keys that still authenticate or expired recently enough to be worth showing; revoked ones are hidden. */
export async function listApiKeys(db: Db, userId: string): Promise<ApiKeyRow[]> {
  return await db
    .selectFrom('api_keys')
    .select(COLUMNS)
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .orderBy('id', 'desc')
    .execute();
}

export async function revokeApiKey(db: Db, userId: string, keyId: string): Promise<ApiKeyRow | undefined> {
  return await db
    .updateTable('api_keys')
    .set({ revoked_at: sql<Date>`now()` })
    .where('user_id', '=', userId)
    .where('id', '=', keyId)
    .where('revoked_at', 'is', null)
    .returning(COLUMNS)
    .executeTakeFirst();
}

export async function revokeKeysOfConversation(db: Db, conversationId: string): Promise<number> {
  const res = await db
    .updateTable('api_keys')
    .set({ revoked_at: sql<Date>`now()` })
    .where('conversation_id', '=', conversationId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(res.numUpdatedRows);
}

/** Revokes every key of a user (a reset or change with revoke_api_keys); returns the revoked ones. */
export async function revokeAllApiKeys(db: Db, userId: string): Promise<ApiKeyRow[]> {
  return await db
    .updateTable('api_keys')
    .set({ revoked_at: sql<Date>`now()` })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .returning(COLUMNS)
    .execute();
}

/** Keys that authenticate right now (not revoked, not expired), oldest first. */
export async function listActiveApiKeys(db: Db, userId: string): Promise<ApiKeyRow[]> {
  return await db
    .selectFrom('api_keys')
    .select(COLUMNS)
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<Date>`now()`)]))
    .orderBy('id', 'asc')
    .execute();
}
