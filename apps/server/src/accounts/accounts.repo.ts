// All SQL of user accounts, email tokens and OAuth identities. A user is its own tenant,
// so "tenant id first" here means the user id comes first. Every function takes the
// database handle explicitly so callers can pass a transaction.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { hashSecret } from '../auth/tokens.ts';
import type { Db } from '../db/database.ts';
import type { EmailTokenPurpose } from './accounts.tables.ts';

export interface UserRow {
  id: string;
  email: string;
  password_hash: string | null;
  email_verified_at: Date | null;
  is_admin: boolean;
  suspended_at: Date | null;
  created_at: Date;
  welcome_sent_at: Date | null;
}

const USER_COLUMNS = [
  'id',
  'email',
  'password_hash',
  'email_verified_at',
  'is_admin',
  'suspended_at',
  'created_at',
  'welcome_sent_at',
] as const;

export async function findUserByEmail(db: Db, email: string): Promise<UserRow | undefined> {
  // users.email is citext: comparison is case-insensitive.
  return await db.selectFrom('users').select(USER_COLUMNS).where('email', '=', email).executeTakeFirst();
}

export async function findUserById(db: Db, userId: string): Promise<UserRow | undefined> {
  return await db.selectFrom('users').select(USER_COLUMNS).where('id', '=', userId).executeTakeFirst();
}

/** The user, its row locked until the transaction ends (account deletion). */
export async function lockUser(db: Db, userId: string): Promise<UserRow | undefined> {
  return await db
    .selectFrom('users')
    .select(USER_COLUMNS)
    .where('id', '=', userId)
    .forUpdate()
    .executeTakeFirst();
}

/** Inserts a user; returns undefined when the email is already taken (case-insensitively). */
export async function insertUser(
  db: Db,
  values: { email: string; passwordHash: string | null; verified: boolean },
): Promise<UserRow | undefined> {
  return await db
    .insertInto('users')
    .values({
      id: uuidv7(),
      email: values.email,
      password_hash: values.passwordHash,
      email_verified_at: values.verified ? sql<Date>`now()` : null,
    })
    .onConflict((oc) => oc.column('email').doNothing())
    .returning(USER_COLUMNS)
    .executeTakeFirst();
}

/** Marks verified; returns the row only when this call did it (it was unverified). */
export async function markVerified(db: Db, userId: string): Promise<UserRow | undefined> {
  return await db
    .updateTable('users')
    .set({ email_verified_at: sql<Date>`now()`, updated_at: sql<Date>`now()` })
    .where('id', '=', userId)
    .where('email_verified_at', 'is', null)
    .returning(USER_COLUMNS)
    .executeTakeFirst();
}

/** Drops the password of an account (it signs in through its linked identity only). */
export async function clearPasswordHash(db: Db, userId: string): Promise<void> {
  await db
    .updateTable('users')
    .set({ password_hash: null, updated_at: sql<Date>`now()` })
    .where('id', '=', userId)
    .execute();
}

export async function setPasswordHash(db: Db, userId: string, hash: string): Promise<void> {
  await db
    .updateTable('users')
    .set({ password_hash: hash, updated_at: sql<Date>`now()` })
    .where('id', '=', userId)
    .execute();
}

/** SQLSTATE 23505: a concurrent writer took the same unique value first. */
function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23505';
}

/**
 * Returns false when the address is taken by another account, including by a concurrent
 * change that commits first (the unique violation is the answer, never a 500 whose detail
 * would carry the address into a log line). After a false the caller must throw: the
 * failed statement has aborted its transaction.
 */
export async function setEmail(db: Db, userId: string, email: string): Promise<boolean> {
  const taken = await db
    .selectFrom('users')
    .select('id')
    .where('email', '=', email)
    .where('id', '!=', userId)
    .executeTakeFirst();
  if (taken) return false;
  try {
    await db
      .updateTable('users')
      .set({ email, updated_at: sql<Date>`now()` })
      .where('id', '=', userId)
      .execute();
  } catch (err) {
    if (isUniqueViolation(err)) return false;
    throw err;
  }
  return true;
}

/** Records a password reset or change: email-change mails requested before it are dropped. */
export async function markCredentialsChanged(db: Db, userId: string): Promise<void> {
  await db
    .updateTable('users')
    .set({ credentials_changed_at: sql<Date>`now()`, updated_at: sql<Date>`now()` })
    .where('id', '=', userId)
    .execute();
}

export async function credentialsChangedAt(db: Db, userId: string): Promise<Date | null> {
  const row = await db
    .selectFrom('users')
    .select('credentials_changed_at')
    .where('id', '=', userId)
    .executeTakeFirst();
  return row?.credentials_changed_at ?? null;
}

export async function setAdmin(db: Db, userId: string): Promise<boolean> {
  const row = await db
    .updateTable('users')
    .set({ is_admin: true, updated_at: sql<Date>`now()` })
    .where('id', '=', userId)
    .where('is_admin', '=', false)
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

export async function anyAdminExists(db: Db): Promise<boolean> {
  const row = await db
    .selectFrom('users')
    .select('id')
    .where('is_admin', '=', true)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Sets or clears suspended_at; returns false when the user was already in that state. */
export async function setSuspended(db: Db, userId: string, suspended: boolean): Promise<boolean> {
  const row = await db
    .updateTable('users')
    .set({ suspended_at: suspended ? sql<Date>`now()` : null, updated_at: sql<Date>`now()` })
    .where('id', '=', userId)
    .where('suspended_at', suspended ? 'is' : 'is not', null)
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/** Claims the once-per-user welcome mail; true for exactly one caller. */
export async function claimWelcome(db: Db, userId: string): Promise<boolean> {
  const row = await db
    .updateTable('users')
    .set({ welcome_sent_at: sql<Date>`now()` })
    .where('id', '=', userId)
    .where('welcome_sent_at', 'is', null)
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

export async function releaseWelcome(db: Db, userId: string): Promise<void> {
  await db.updateTable('users').set({ welcome_sent_at: null }).where('id', '=', userId).execute();
}

export async function listUsers(
  db: Db,
  opts: { limit: number; afterId?: string; search?: string },
): Promise<UserRow[]> {
  let q = db.selectFrom('users').select(USER_COLUMNS);
  if (opts.afterId) q = q.where('id', '>', opts.afterId);
  // A substring of the address; LIKE's wildcards in the search are taken literally.
  if (opts.search) q = q.where(sql<boolean>`strpos(lower(email::text), lower(${opts.search})) > 0`);
  return await q.orderBy('id', 'asc').limit(opts.limit).execute();
}

// Email tokens --------------------------------------------------------------------------

export async function insertEmailToken(
  db: Db,
  userId: string,
  values: { purpose: EmailTokenPurpose; token: string; ttlMs: number; newEmail?: string },
): Promise<string> {
  const id = uuidv7();
  await db
    .insertInto('email_tokens')
    .values({
      id,
      user_id: userId,
      purpose: values.purpose,
      token_hash: hashSecret(values.token),
      new_email: values.newEmail ?? null,
      expires_at: new Date(Date.now() + values.ttlMs),
    })
    .execute();
  return id;
}

export async function deleteEmailToken(db: Db, userId: string, tokenId: string): Promise<void> {
  await db.deleteFrom('email_tokens').where('user_id', '=', userId).where('id', '=', tokenId).execute();
}

/**
 * Consumes a token atomically: the UPDATE ... WHERE used_at IS NULL succeeds for exactly
 * one caller, so a token works once even under concurrent use.
 */
export async function consumeEmailToken(
  db: Db,
  purpose: EmailTokenPurpose,
  token: string,
): Promise<{ user_id: string; new_email: string | null } | undefined> {
  return await db
    .updateTable('email_tokens')
    .set({ used_at: sql<Date>`now()` })
    .where('token_hash', '=', hashSecret(token))
    .where('purpose', '=', purpose)
    .where('used_at', 'is', null)
    .where('expires_at', '>', sql<Date>`now()`)
    .returning(['user_id', 'new_email'])
    .executeTakeFirst();
}

/** Invalidates a user's outstanding tokens of these purposes (after a reset, the others die). */
export async function expireEmailTokens(
  db: Db,
  userId: string,
  purposes: readonly EmailTokenPurpose[],
): Promise<void> {
  await db
    .updateTable('email_tokens')
    .set({ used_at: sql<Date>`now()` })
    .where('user_id', '=', userId)
    .where('purpose', 'in', purposes)
    .where('used_at', 'is', null)
    .execute();
}

/** A token in any state (used, expired or live), to tell a second click from a forged link. */
export async function findEmailToken(
  db: Db,
  purpose: EmailTokenPurpose,
  token: string,
): Promise<{ user_id: string; new_email: string | null; live: boolean } | undefined> {
  return await db
    .selectFrom('email_tokens')
    .select(['user_id', 'new_email', sql<boolean>`used_at IS NULL AND expires_at > now()`.as('live')])
    .where('token_hash', '=', hashSecret(token))
    .where('purpose', '=', purpose)
    .executeTakeFirst();
}

// OAuth identities ----------------------------------------------------------------------

export async function findIdentity(
  db: Db,
  provider: string,
  providerUserId: string,
): Promise<{ user_id: string } | undefined> {
  return await db
    .selectFrom('oauth_identities')
    .select('user_id')
    .where('provider', '=', provider)
    .where('provider_user_id', '=', providerUserId)
    .executeTakeFirst();
}

export async function insertIdentity(
  db: Db,
  userId: string,
  values: { provider: string; providerUserId: string; email: string },
): Promise<void> {
  await db
    .insertInto('oauth_identities')
    .values({
      id: uuidv7(),
      user_id: userId,
      provider: values.provider,
      provider_user_id: values.providerUserId,
      email: values.email,
    })
    .onConflict((oc) => oc.columns(['provider', 'provider_user_id']).doNothing())
    .execute();
}
