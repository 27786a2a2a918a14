import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { prepared } from '../db/prepared.ts';
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

const TOUCH_INTERVAL_MS = 60_000;
const touching = new Set<string>();

/**
 * Resolves a bearer API key in one query: key by hash, not revoked, not expired, owner
 * verified and not suspended. Anything else is "no principal" (401), never a hint why.
 * `last_used_at` is advisory: refreshed at most once a minute per key, off the request
 * path (the request never waits for that write).
 */
const findActiveKey = prepared('principal_by_key', (db, p: { hash: Buffer }) =>
  db
    .selectFrom('api_keys as k')
    .innerJoin('users as u', 'u.id', 'k.user_id')
    .select([
      'k.id as key_id',
      'k.scope',
      'k.conversation_id',
      'k.last_used_at',
      'k.expires_at',
      'u.id as user_id',
      'u.email',
      'u.is_admin',
    ])
    .where('k.key_hash', '=', p.hash)
    .where('k.revoked_at', 'is', null)
    .where((eb) => eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', sql<Date>`now()`)]))
    .where('u.email_verified_at', 'is not', null)
    .where('u.suspended_at', 'is', null),
);

/** The cache principalFromApiKey consults (principal-cache.ts implements it and states its invariants). */
export interface PrincipalCache {
  /** The epoch to pass to set() for a lookup starting now. */
  epoch(): number;
  get(keyHash: string): Principal | undefined;
  /** `notAfter` (ms since epoch): the key's own expiry; the entry never outlives it. */
  set(keyHash: string, principal: Principal, startedAtEpoch: number, notAfter?: number): void;
  /** Drops every entry the predicate matches and invalidates lookups in flight. */
  forget(match: (principal: Principal) => boolean): void;
}

export async function principalFromApiKey(
  db: Db,
  key: string,
  cache?: PrincipalCache,
): Promise<Principal | null> {
  const hash = hashApiKey(key);
  const cacheKey = hash.toString('base64');
  const cached = cache?.get(cacheKey);
  if (cached) return cached;
  const startedAt = cache?.epoch() ?? 0;
  const row = await findActiveKey.first(db, { hash });
  if (!row) return null;
  const stale = !row.last_used_at || Date.now() - row.last_used_at.getTime() > TOUCH_INTERVAL_MS;
  if (stale && !touching.has(row.key_id)) {
    touching.add(row.key_id);
    db.updateTable('api_keys')
      .set({ last_used_at: sql<Date>`now()` })
      .where('id', '=', row.key_id)
      .execute()
      .catch(() => {
        // Advisory bookkeeping: a failed touch is retried on a later request.
      })
      .finally(() => touching.delete(row.key_id));
  }
  const principal: Principal = {
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
  cache?.set(cacheKey, principal, startedAt, row.expires_at?.getTime());
  return principal;
}
