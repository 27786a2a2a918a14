// All SQL of browser sessions. Tokens are looked up by their SHA-256 only.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../db/database.ts';
import { hashSecret } from './tokens.ts';

export interface SessionPrincipalRow {
  session_id: string;
  last_seen_at: Date;
  user_id: string;
  email: string;
  is_admin: boolean;
}

export async function insertSession(
  db: Db,
  userId: string,
  values: { token: string; expiresAt: Date; ip: string | null; userAgent: string | null },
): Promise<string> {
  const id = uuidv7();
  await db
    .insertInto('sessions')
    .values({
      id,
      user_id: userId,
      token_hash: hashSecret(values.token),
      expires_at: values.expiresAt,
      ip: values.ip,
      user_agent: values.userAgent,
    })
    .execute();
  return id;
}

/** A live session: within its absolute and idle timeouts, owner verified and not suspended. */
export async function findLiveSession(
  db: Db,
  token: string,
  idleTimeoutMs: number,
): Promise<SessionPrincipalRow | undefined> {
  return await db
    .selectFrom('sessions as s')
    .innerJoin('users as u', 'u.id', 's.user_id')
    .select(['s.id as session_id', 's.last_seen_at', 'u.id as user_id', 'u.email', 'u.is_admin'])
    .where('s.token_hash', '=', hashSecret(token))
    .where('s.expires_at', '>', sql<Date>`now()`)
    .where('s.last_seen_at', '>', sql<Date>`now() - make_interval(secs => ${idleTimeoutMs / 1000})`)
    .where('u.email_verified_at', 'is not', null)
    .where('u.suspended_at', 'is', null)
    .executeTakeFirst();
}

export async function touchSession(db: Db, sessionId: string): Promise<void> {
  await db
    .updateTable('sessions')
    .set({ last_seen_at: sql<Date>`now()` })
    .where('id', '=', sessionId)
    .execute();
}

export async function deleteSessionByToken(db: Db, token: string): Promise<void> {
  await db.deleteFrom('sessions').where('token_hash', '=', hashSecret(token)).execute();
}

/** Ends every session of a user, except `keepSessionId` when given. Returns how many ended. */
export async function deleteUserSessions(
  db: Db,
  userId: string,
  keepSessionId?: string | null,
): Promise<number> {
  let q = db.deleteFrom('sessions').where('user_id', '=', userId);
  if (keepSessionId) q = q.where('id', '!=', keepSessionId);
  const res = await q.executeTakeFirst();
  return Number(res.numDeletedRows);
}
