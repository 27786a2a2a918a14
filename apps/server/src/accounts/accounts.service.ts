// Accounts: registration, verification, password login, password and email changes,
// first-user admin, suspension and OAuth sign-in. Invariants (accounts.http.test.ts,
// first-admin.test.ts):
// - Emails are unique case-insensitively (citext); registration of a taken address answers
//   422 `email: is already registered` (see docs/accounts.md for why this is not hidden).
// - Password login runs exactly one argon2id verification per attempt, against a dummy
//   hash for an unknown or OAuth-only account, and answers the same 401 for unknown user,
//   wrong password and OAuth-only account. Only after a correct password does a caller
//   learn that an account is unverified (403 email_not_verified) or suspended
//   (403 account_unavailable; its sessions are ended on the spot).
// - FIRST_USER_ADMIN promotes on verification, never registration, inside the verifying
//   transaction under a transaction-scoped advisory lock: exactly one account wins however
//   many verify concurrently, and the grant is audited as admin.role.granted with a null
//   actor and via 'first_user_admin'.
// - Email tokens are single-use (atomic consume) and expire: verification 48 h, password
//   reset 1 h, email change 24 h. Mail is enqueued in the same transaction as the change.
// Account security (docs/security.md; accounts.security.test.ts):
// - A password reset or change ends every session (a change keeps the caller's own), voids
//   every pending reset and email-change token and stamps credentials_changed_at, so an
//   email-change mail still queued from before is never sent. API keys survive unless the
//   caller sends revoke_api_keys; the "password changed" mail lists the keys still active.
//   Confirming an email change voids the user's other pending email-change tokens.
// - password-reset and resend-verification do one thing in the request whatever the
//   address: enqueue one job naming it. The job finds out whether the account exists.
// - An email change answers the same 202 whether or not the new address is registered; the
//   registered address's owner is told by mail instead of the caller by the response.
// - Failed sign-ins are counted per address (registered or not) in PostgreSQL; over
//   LOGIN_FAILURE_MAX in the window the address answers 429 without checking the password.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { AuditEntry, AuditService } from '../audit/audit.service.ts';
import type { ApiKeysService, CreatedApiKey } from '../auth/api-keys.service.ts';
import type { Principal, PrincipalCache } from '../auth/principal.ts';
import type { SessionsService } from '../auth/sessions.service.ts';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import type { MailQueue } from '../mail/mail.queue.ts';
import {
  anyAdminExists,
  clearPasswordHash,
  consumeEmailToken,
  expireEmailTokens,
  findEmailToken,
  findIdentity,
  findUserByEmail,
  findUserById,
  insertIdentity,
  insertUser,
  listUsers,
  markCredentialsChanged,
  markVerified,
  setAdmin,
  setEmail,
  setPasswordHash,
  setSuspended,
  type UserRow,
} from './accounts.repo.ts';
import type { EmailTokenPurpose } from './accounts.tables.ts';
import { hashPassword, passwordProblems, verifyPassword } from './password.ts';
import { clearLoginFailures, loginBlockedForSeconds, recordLoginFailure } from './throttles.repo.ts';

export const VERIFICATION_TTL_MS = 48 * 60 * 60 * 1000;
export const PASSWORD_RESET_TTL_MS = 60 * 60 * 1000;
export const EMAIL_CHANGE_TTL_MS = 24 * 60 * 60 * 1000;

// A fixed 64-bit key: "paddock first admin".
const FIRST_ADMIN_LOCK_KEY = '7261633001845240';

export interface UserView {
  id: string;
  email: string;
  email_verified: boolean;
  is_admin: boolean;
  suspended: boolean;
  created_at: string;
}

export function toUserView(u: UserRow): UserView {
  return {
    id: u.id,
    email: u.email,
    email_verified: u.email_verified_at !== null,
    is_admin: u.is_admin,
    suspended: u.suspended_at !== null,
    created_at: u.created_at.toISOString(),
  };
}

export interface RequestContext {
  ip: string | null;
}

export interface AccountsService {
  register(
    input: { email: string; password: string },
    ctx: RequestContext,
  ): Promise<{ user: UserView; canSignInNow: boolean }>;
  verifyEmail(token: string, ctx: RequestContext): Promise<UserView>;
  resendVerification(email: string): Promise<void>;
  /**
   * Whether a mailed link that no longer works was for an action already done for its
   * account (the address is verified, the email change happened): a second click, or a
   * mail scanner's click before the person's own.
   */
  linkAlreadyUsed(
    purpose: Extract<EmailTokenPurpose, 'verify_email' | 'email_change'>,
    token: string,
  ): Promise<boolean>;
  /** Checks email + password and the account state; returns the user allowed to sign in. */
  authenticate(input: { email: string; password: string }, ctx: RequestContext): Promise<UserRow>;
  mintKeyWithPassword(
    input: { email: string; password: string; name: string; expiresInDays?: number | null },
    ctx: RequestContext,
  ): Promise<CreatedApiKey>;
  changePassword(
    principal: Principal,
    input: { currentPassword: string; newPassword: string; revokeApiKeys?: boolean },
    ctx: RequestContext,
  ): Promise<{ sessionsEnded: number; apiKeysRevoked: number }>;
  requestPasswordReset(email: string, ctx: RequestContext): Promise<void>;
  confirmPasswordReset(
    input: { token: string; password: string; revokeApiKeys?: boolean },
    ctx: RequestContext,
  ): Promise<{ apiKeysRevoked: number }>;
  requestEmailChange(
    principal: Principal,
    input: { currentPassword: string; newEmail: string },
    ctx: RequestContext,
  ): Promise<{ status: 'confirmation_sent' | 'changed' }>;
  confirmEmailChange(token: string, ctx: RequestContext): Promise<UserView>;
  me(principal: Principal): Promise<UserView & { has_password: boolean }>;
  // Admin
  listUsers(
    admin: Principal,
    opts: { limit: number; cursor?: string; search?: string },
    ctx: RequestContext,
  ): Promise<{
    data: UserView[];
    meta: { next_cursor: string | null; has_more: boolean };
  }>;
  setSuspended(admin: Principal, userId: string, suspended: boolean, ctx: RequestContext): Promise<UserView>;
  /** Marks the account's email verified (as its link would), audited as the admin's act. */
  verifyByAdmin(admin: Principal, userId: string, ctx: RequestContext): Promise<UserView>;
  /** Grants the admin role. There is no demotion in the API: an operator does that in the database. */
  promoteByAdmin(admin: Principal, userId: string, ctx: RequestContext): Promise<UserView>;
  /**
   * Mails the account a password reset link, as "Forgot password" would (printed to the log in
   * development without mail). Refused with `mail_unavailable` when no mail can be made.
   */
  sendPasswordResetByAdmin(admin: Principal, userId: string, ctx: RequestContext): Promise<void>;
  /**
   * Sets a generated temporary password, returned once: every session of the account ends and
   * pending reset and email-change links stop working; its API keys stay. For an account
   * without mail, the admin hands it over and the person changes it after signing in.
   */
  setTemporaryPasswordByAdmin(
    admin: Principal,
    userId: string,
    ctx: RequestContext,
  ): Promise<{ user: UserView; temporaryPassword: string }>;
  // Release tasks
  verifyEmailByOperator(email: string): Promise<'verified' | 'already_verified'>;
  promoteAdminByOperator(email: string): Promise<'granted' | 'already_admin'>;
  // OAuth
  signInWithOAuth(
    identity: { provider: string; providerUserId: string; verifiedEmails: string[]; primaryEmail?: string },
    ctx: RequestContext,
  ): Promise<UserRow>;
}

export interface AccountsDeps {
  db: Db;
  config: Config;
  audit: AuditService;
  mailQueue: MailQueue;
  sessions: Pick<SessionsService, 'endAllForUser'>;
  apiKeys: Pick<ApiKeysService, 'create' | 'revokeAllForUser'>;
  /** Told after a suspension or a key revocation commits, so this replica stops honouring the keys at once. */
  principals: Pick<PrincipalCache, 'forget'>;
  /** Creates the tenant's data encryption key; called in the registration transaction. */
  tenantKeys: { ensureTenantKey(tenantId: string, db?: Db): Promise<void> };
  /** Billing on: starts the new account's trial clock, in the registration transaction. */
  trials?: { startTrial(db: Db, userId: string): Promise<void> };
}

const SYSTEM: AuditEntry['actor'] = { kind: 'system', userId: null, apiKeyId: null };

function userActor(userId: string): AuditEntry['actor'] {
  return { kind: 'user', userId, apiKeyId: null };
}

function principalActor(p: Principal): AuditEntry['actor'] {
  return p.via === 'api_key'
    ? { kind: 'api_key', userId: p.userId, apiKeyId: p.apiKeyId }
    : { kind: 'user', userId: p.userId, apiKeyId: null };
}

/** The database's clock (ISO), compared later with credentials_changed_at, which it also set. */
async function databaseNow(db: Db): Promise<string> {
  const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(db);
  return rows[0]!.now.toISOString();
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function createAccountsService(deps: AccountsDeps): AccountsService {
  const { db, config, audit, mailQueue } = deps;

  const invalidCredentials = () => new AppError('unauthorized', 'invalid email or password');

  function domainAllowed(email: string): boolean {
    const allowed = config.registration.allowedEmailDomains;
    if (allowed.length === 0) return true;
    const domain = email.slice(email.lastIndexOf('@') + 1).toLowerCase();
    return allowed.includes(domain);
  }

  function assertPasswordPolicy(password: string, field: string, email?: string): void {
    const problems = passwordProblems(password, email ? { email } : {});
    if (problems.length > 0) throw AppError.validation({ [field]: problems });
  }

  /**
   * Everything that follows an account becoming verified, inside the verifying
   * transaction: the audit row, first-user admin, and the welcome mail.
   */
  async function afterVerified(trx: Db, user: UserRow, ctx: RequestContext, via: string): Promise<UserRow> {
    await audit.record(
      { type: 'user.email_verified', tenantId: user.id, actor: SYSTEM, ip: ctx.ip, metadata: { via } },
      trx,
    );
    let result = user;
    if (config.firstUserAdmin && !user.is_admin) {
      await sql`SELECT pg_advisory_xact_lock(${FIRST_ADMIN_LOCK_KEY}::bigint)`.execute(trx);
      if (!(await anyAdminExists(trx)) && (await setAdmin(trx, user.id))) {
        await audit.record(
          {
            type: 'admin.role.granted',
            tenantId: user.id,
            actor: SYSTEM,
            ip: ctx.ip,
            metadata: { via: 'first_user_admin', user_id: user.id },
          },
          trx,
        );
        result = { ...user, is_admin: true };
      }
    }
    if (user.welcome_sent_at === null) await mailQueue.enqueue(trx, { kind: 'welcome', userId: user.id });
    return result;
  }

  /**
   * What a password reset and a password change both revoke, inside their transaction:
   * pending reset and email-change links (and, through credentials_changed_at, any
   * email-change mail still queued), sessions but `keepSessionId`, and on request every
   * API key. Queues the "password changed" mail, which lists the keys still active.
   */
  async function afterCredentialsChanged(
    trx: Db,
    userId: string,
    opts: {
      keepSessionId: string | null;
      revokeApiKeys: boolean;
      actor: AuditEntry['actor'];
      ip: string | null;
      via: 'reset' | 'change' | 'admin';
    },
  ): Promise<{ sessionsEnded: number; apiKeysRevoked: number }> {
    await markCredentialsChanged(trx, userId);
    await expireEmailTokens(trx, userId, ['password_reset', 'email_change']);
    const sessionsEnded = await deps.sessions.endAllForUser(userId, opts.keepSessionId, trx);
    const apiKeysRevoked = opts.revokeApiKeys
      ? await deps.apiKeys.revokeAllForUser(
          userId,
          { actor: opts.actor, ip: opts.ip, via: `password_${opts.via}` },
          trx,
        )
      : 0;
    await mailQueue.enqueue(trx, { kind: 'password_changed', userId, via: opts.via });
    return { sessionsEnded, apiKeysRevoked };
  }

  async function checkPasswordAndState(
    email: string,
    password: string,
    ctx: RequestContext,
  ): Promise<UserRow> {
    const throttle = {
      max: config.rateLimit.loginFailureMax,
      windowSeconds: config.rateLimit.loginFailureWindowSeconds,
    };
    // Checked before the account is looked up, and the same for any address: no oracle.
    const blockedFor = await loginBlockedForSeconds(db, email, throttle);
    if (blockedFor > 0) {
      throw new AppError(
        'rate_limited',
        `too many failed sign-ins for this address; retry in ${blockedFor} s or reset the password`,
        { headers: { 'retry-after': String(blockedFor) } },
      );
    }
    const user = await findUserByEmail(db, email);
    const ok = await verifyPassword(user?.password_hash ?? null, password);
    if (!ok || !user) {
      await recordLoginFailure(db, email, throttle.windowSeconds);
      // Recorded for unknown users too (tenant null) so both paths do the same work.
      await audit.record({
        type: 'auth.login.failed',
        tenantId: user?.id ?? null,
        actor: SYSTEM,
        ip: ctx.ip,
        metadata: {},
      });
      throw invalidCredentials();
    }
    await clearLoginFailures(db, email);
    if (user.suspended_at !== null) {
      await deps.sessions.endAllForUser(user.id);
      throw new AppError('account_unavailable', 'this account cannot sign in; contact support');
    }
    if (user.email_verified_at === null) {
      throw new AppError(
        'email_not_verified',
        'confirm your email address first; POST /api/auth/resend-verification sends a new link',
      );
    }
    return user;
  }

  return {
    async register(input, ctx) {
      if (!config.registration.enabled) {
        throw new AppError('registration_closed', 'registration is closed on this instance');
      }
      const email = input.email.trim();
      if (!domainAllowed(email)) {
        throw AppError.validation({ email: ['this email domain is not allowed to register here'] });
      }
      assertPasswordPolicy(input.password, 'password', email);
      const passwordHash = await hashPassword(input.password);
      const selfVerify = !mailQueue.enabled;
      const user = await db.transaction().execute(async (trx) => {
        const created = await insertUser(trx, { email, passwordHash, verified: selfVerify });
        if (!created) throw AppError.validation({ email: ['is already registered'] });
        await deps.tenantKeys.ensureTenantKey(created.id, trx);
        await deps.trials?.startTrial(trx, created.id);
        await audit.record(
          {
            type: 'user.registered',
            tenantId: created.id,
            actor: userActor(created.id),
            ip: ctx.ip,
            metadata: { self_verified: selfVerify },
          },
          trx,
        );
        if (selfVerify) return await afterVerified(trx, created, ctx, 'self_verified');
        await mailQueue.enqueue(trx, { kind: 'verification', userId: created.id });
        return created;
      });
      return { user: toUserView(user), canSignInNow: selfVerify };
    },

    async verifyEmail(token, ctx) {
      return await db.transaction().execute(async (trx) => {
        const claimed = await consumeEmailToken(trx, 'verify_email', token);
        if (!claimed) throw AppError.validation({ token: ['is invalid, already used or expired'] });
        const verified = await markVerified(trx, claimed.user_id);
        if (!verified) {
          const existing = await findUserById(trx, claimed.user_id);
          if (!existing) throw AppError.validation({ token: ['is invalid, already used or expired'] });
          return toUserView(existing);
        }
        return toUserView(await afterVerified(trx, verified, ctx, 'email_link'));
      });
    },

    async resendVerification(email) {
      // The job looks the address up: the request does the same work for any address.
      await mailQueue.enqueue(db, { kind: 'verification', email: email.trim() });
    },

    async linkAlreadyUsed(purpose, token) {
      const row = await findEmailToken(db, purpose, token);
      if (!row) return false;
      const user = await findUserById(db, row.user_id);
      if (!user) return false;
      if (purpose === 'verify_email') return user.email_verified_at !== null;
      return row.new_email !== null && row.new_email.toLowerCase() === user.email.toLowerCase();
    },

    async authenticate(input, ctx) {
      return await checkPasswordAndState(input.email.trim(), input.password, ctx);
    },

    async mintKeyWithPassword(input, ctx) {
      const user = await checkPasswordAndState(input.email.trim(), input.password, ctx);
      return await deps.apiKeys.create(
        user.id,
        { name: input.name, expiresInDays: input.expiresInDays ?? null },
        { actor: userActor(user.id), ip: ctx.ip, via: 'password' },
      );
    },

    async changePassword(principal, input, ctx) {
      const user = await findUserById(db, principal.userId);
      if (!user) throw new AppError('unauthorized', 'missing or invalid credentials');
      if (!(await verifyPassword(user.password_hash, input.currentPassword))) {
        throw AppError.validation({ current_password: ['is incorrect'] });
      }
      assertPasswordPolicy(input.newPassword, 'new_password', user.email);
      const hash = await hashPassword(input.newPassword);
      const actor = principalActor(principal);
      const result = await db.transaction().execute(async (trx) => {
        await setPasswordHash(trx, user.id, hash);
        // The caller just proved the current password: their own session stays signed in.
        const revoked = await afterCredentialsChanged(trx, user.id, {
          keepSessionId: principal.sessionId,
          revokeApiKeys: input.revokeApiKeys === true,
          actor,
          ip: ctx.ip,
          via: 'change',
        });
        await audit.record(
          {
            type: 'user.password_changed',
            tenantId: user.id,
            actor,
            ip: ctx.ip,
            metadata: { sessions_ended: revoked.sessionsEnded, api_keys_revoked: revoked.apiKeysRevoked },
          },
          trx,
        );
        return revoked;
      });
      if (result.apiKeysRevoked > 0) deps.principals.forget((p) => p.userId === user.id);
      return result;
    },

    async requestPasswordReset(email, ctx) {
      // The job looks the address up (and audits the request): the request does the same
      // work for any address, so its timing tells nothing.
      await mailQueue.enqueue(db, { kind: 'password_reset', email: email.trim(), ip: ctx.ip });
    },

    async confirmPasswordReset(input, ctx) {
      const invalidToken = () => AppError.validation({ token: ['is invalid, already used or expired'] });
      // The policy needs the account's address; read it through the token without using it.
      const peek = await findEmailToken(db, 'password_reset', input.token);
      const owner = peek?.live ? await findUserById(db, peek.user_id) : undefined;
      assertPasswordPolicy(input.password, 'password', owner?.email);
      const hash = await hashPassword(input.password);
      const result = await db.transaction().execute(async (trx) => {
        const claimed = await consumeEmailToken(trx, 'password_reset', input.token);
        if (!claimed) throw invalidToken();
        const user = await findUserById(trx, claimed.user_id);
        if (!user || user.suspended_at !== null) throw invalidToken();
        // The address may have changed since the peek: the rule holds for the current one.
        assertPasswordPolicy(input.password, 'password', user.email);
        await setPasswordHash(trx, user.id, hash);
        const revoked = await afterCredentialsChanged(trx, user.id, {
          keepSessionId: null,
          revokeApiKeys: input.revokeApiKeys === true,
          actor: userActor(user.id),
          ip: ctx.ip,
          via: 'reset',
        });
        // Proving the mailbox is the way out of a sign-in throttle on it.
        await clearLoginFailures(trx, user.email);
        await audit.record(
          {
            type: 'user.password_reset',
            tenantId: user.id,
            actor: userActor(user.id),
            ip: ctx.ip,
            metadata: { sessions_ended: revoked.sessionsEnded, api_keys_revoked: revoked.apiKeysRevoked },
          },
          trx,
        );
        // The reset link proves control of the mailbox, which is what verification proves.
        const verified = await markVerified(trx, user.id);
        if (verified) await afterVerified(trx, verified, ctx, 'password_reset');
        return { userId: user.id, apiKeysRevoked: revoked.apiKeysRevoked };
      });
      if (result.apiKeysRevoked > 0) deps.principals.forget((p) => p.userId === result.userId);
      return { apiKeysRevoked: result.apiKeysRevoked };
    },

    async requestEmailChange(principal, input, ctx) {
      const user = await findUserById(db, principal.userId);
      if (!user) throw new AppError('unauthorized', 'missing or invalid credentials');
      if (!(await verifyPassword(user.password_hash, input.currentPassword))) {
        throw AppError.validation({ current_password: ['is incorrect'] });
      }
      const newEmail = input.newEmail.trim();
      if (newEmail.toLowerCase() === user.email.toLowerCase()) {
        throw AppError.validation({ new_email: ['is already your email address'] });
      }
      if (!domainAllowed(newEmail)) {
        throw AppError.validation({ new_email: ['this email domain is not allowed here'] });
      }
      const taken = (await findUserByEmail(db, newEmail)) !== undefined;
      return await db.transaction().execute(async (trx) => {
        const actor = principalActor(principal);
        if (!mailQueue.enabled) {
          // EMAIL_DELIVERY=none: no link can be sent and nobody can be told by mail, so a
          // taken address is refused in the answer, as registration does in this mode.
          if (taken || !(await setEmail(trx, user.id, newEmail))) {
            throw AppError.validation({ new_email: ['is already registered'] });
          }
          await audit.record(
            {
              type: 'user.email_changed',
              tenantId: user.id,
              actor,
              ip: ctx.ip,
              metadata: { from: user.email, to: newEmail, confirmed_by: 'email_delivery_none' },
            },
            trx,
          );
          return { status: 'changed' as const };
        }
        await audit.record(
          {
            type: 'user.email_change_requested',
            tenantId: user.id,
            actor,
            ip: ctx.ip,
            metadata: { from: user.email, to: newEmail },
          },
          trx,
        );
        // Same answer and same work either way: the owner of a registered address is told by
        // mail (and gets no link); the caller learns nothing about who is registered.
        await mailQueue.enqueue(
          trx,
          taken
            ? { kind: 'email_taken_notice', userId: user.id, newEmail }
            : {
                kind: 'email_change_confirm',
                userId: user.id,
                newEmail,
                requestedAt: await databaseNow(trx),
              },
        );
        await mailQueue.enqueue(trx, {
          kind: 'email_change_notice',
          userId: user.id,
          newEmail,
          to: user.email,
        });
        return { status: 'confirmation_sent' as const };
      });
    },

    async confirmEmailChange(token, ctx) {
      return await db.transaction().execute(async (trx) => {
        const claimed = await consumeEmailToken(trx, 'email_change', token);
        if (!claimed?.new_email)
          throw AppError.validation({ token: ['is invalid, already used or expired'] });
        const before = await findUserById(trx, claimed.user_id);
        if (!before) throw AppError.validation({ token: ['is invalid, already used or expired'] });
        if (!(await setEmail(trx, before.id, claimed.new_email))) {
          throw AppError.validation({ new_email: ['is already registered'] });
        }
        // One change wins; the other pending links of this account die with it.
        await expireEmailTokens(trx, before.id, ['email_change']);
        await audit.record(
          {
            type: 'user.email_changed',
            tenantId: before.id,
            actor: userActor(before.id),
            ip: ctx.ip,
            metadata: { from: before.email, to: claimed.new_email, confirmed_by: 'email_link' },
          },
          trx,
        );
        const after = await findUserById(trx, before.id);
        return toUserView(after!);
      });
    },

    async me(principal) {
      const user = await findUserById(db, principal.userId);
      if (!user) throw new AppError('unauthorized', 'missing or invalid credentials');
      return { ...toUserView(user), has_password: user.password_hash !== null };
    },

    async listUsers(admin, opts, ctx) {
      let afterId: string | undefined;
      if (opts.cursor) {
        afterId = Buffer.from(opts.cursor, 'base64url').toString('utf8');
        if (!UUID.test(afterId)) throw AppError.validation({ cursor: ['is not a valid cursor'] });
      }
      const rows = await listUsers(db, {
        limit: opts.limit + 1,
        ...(afterId ? { afterId } : {}),
        ...(opts.search ? { search: opts.search } : {}),
      });
      const page = rows.slice(0, opts.limit);
      const hasMore = rows.length > opts.limit;
      // A cross-tenant read by an admin is itself audited, in the admin's own log.
      await audit.record({
        type: 'admin.users.listed',
        tenantId: admin.userId,
        actor: principalActor(admin),
        ip: ctx.ip,
        metadata: { count: page.length, ...(opts.search ? { search: opts.search } : {}) },
      });
      const last = page.at(-1);
      return {
        data: page.map(toUserView),
        meta: {
          next_cursor: hasMore && last ? Buffer.from(last.id, 'utf8').toString('base64url') : null,
          has_more: hasMore,
        },
      };
    },

    async setSuspended(admin, userId, suspended, ctx) {
      if (!UUID.test(userId)) throw AppError.notFound('user');
      if (userId === admin.userId) {
        throw AppError.validation({ id: ['administrators cannot suspend themselves'] });
      }
      const view = await db.transaction().execute(async (trx) => {
        const user = await findUserById(trx, userId);
        if (!user) throw AppError.notFound('user');
        if (await setSuspended(trx, userId, suspended)) {
          if (suspended) {
            await deps.sessions.endAllForUser(userId, null, trx);
            await expireEmailTokens(trx, userId, ['password_reset', 'email_change']);
          }
          await audit.record(
            {
              type: suspended ? 'admin.user.suspended' : 'admin.user.unsuspended',
              tenantId: userId,
              actor: principalActor(admin),
              ip: ctx.ip,
              metadata: { admin_user_id: admin.userId },
            },
            trx,
          );
          await mailQueue.enqueue(trx, { kind: suspended ? 'suspended' : 'unsuspended', userId });
        }
        return toUserView((await findUserById(trx, userId))!);
      });
      if (suspended) deps.principals.forget((p) => p.userId === userId);
      return view;
    },

    async verifyByAdmin(admin, userId, ctx) {
      if (!UUID.test(userId)) throw AppError.notFound('user');
      return await db.transaction().execute(async (trx) => {
        const verified = await markVerified(trx, userId);
        if (!verified) {
          const existing = await findUserById(trx, userId);
          if (!existing) throw AppError.notFound('user');
          return toUserView(existing);
        }
        return toUserView(await afterVerified(trx, verified, ctx, `admin:${admin.userId}`));
      });
    },

    async promoteByAdmin(admin, userId, ctx) {
      if (!UUID.test(userId)) throw AppError.notFound('user');
      return await db.transaction().execute(async (trx) => {
        const user = await findUserById(trx, userId);
        if (!user) throw AppError.notFound('user');
        if (await setAdmin(trx, userId)) {
          await audit.record(
            {
              type: 'admin.role.granted',
              tenantId: userId,
              actor: principalActor(admin),
              ip: ctx.ip,
              metadata: { via: 'admin', user_id: userId, admin_user_id: admin.userId },
            },
            trx,
          );
        }
        return toUserView((await findUserById(trx, userId))!);
      });
    },

    async sendPasswordResetByAdmin(admin, userId, ctx) {
      if (!UUID.test(userId)) throw AppError.notFound('user');
      if (!mailQueue.made) {
        throw new AppError(
          'mail_unavailable',
          'no mail is configured (EMAIL_DELIVERY=none), so no link can be sent; set a temporary password instead',
        );
      }
      await db.transaction().execute(async (trx) => {
        const user = await findUserById(trx, userId);
        if (!user) throw AppError.notFound('user');
        if (user.suspended_at !== null) {
          throw AppError.validation({ id: ['the account is suspended: lift the suspension first'] });
        }
        await audit.record(
          {
            type: 'admin.user.password_reset_sent',
            tenantId: userId,
            actor: principalActor(admin),
            ip: ctx.ip,
            metadata: { admin_user_id: admin.userId },
          },
          trx,
        );
        // The job mints the link at send time, as for a reset the person asks for.
        await mailQueue.enqueue(trx, { kind: 'password_reset', userId });
      });
    },

    async setTemporaryPasswordByAdmin(admin, userId, ctx) {
      if (!UUID.test(userId)) throw AppError.notFound('user');
      if (userId === admin.userId) {
        throw AppError.validation({ id: ['change your own password on the Account page'] });
      }
      // 20 characters of base64url (120 bits): past every length rule, typed once by hand.
      const temporaryPassword = randomBytes(15).toString('base64url');
      const hash = await hashPassword(temporaryPassword);
      const actor = principalActor(admin);
      const view = await db.transaction().execute(async (trx) => {
        const user = await findUserById(trx, userId);
        if (!user) throw AppError.notFound('user');
        await setPasswordHash(trx, userId, hash);
        const changed = await afterCredentialsChanged(trx, userId, {
          keepSessionId: null,
          revokeApiKeys: false,
          actor,
          ip: ctx.ip,
          via: 'admin',
        });
        await clearLoginFailures(trx, user.email);
        await audit.record(
          {
            type: 'admin.user.password_set',
            tenantId: userId,
            actor,
            ip: ctx.ip,
            metadata: { admin_user_id: admin.userId, sessions_ended: changed.sessionsEnded },
          },
          trx,
        );
        return toUserView((await findUserById(trx, userId))!);
      });
      return { user: view, temporaryPassword };
    },

    async verifyEmailByOperator(email) {
      return await db.transaction().execute(async (trx) => {
        const user = await findUserByEmail(trx, email.trim());
        if (!user) throw new AppError('not_found', `no account with email ${email}`);
        const verified = await markVerified(trx, user.id);
        if (!verified) return 'already_verified' as const;
        await afterVerified(trx, verified, { ip: null }, 'release_task');
        return 'verified' as const;
      });
    },

    async promoteAdminByOperator(email) {
      return await db.transaction().execute(async (trx) => {
        const user = await findUserByEmail(trx, email.trim());
        if (!user) throw new AppError('not_found', `no account with email ${email}`);
        if (!(await setAdmin(trx, user.id))) return 'already_admin' as const;
        await audit.record(
          {
            type: 'admin.role.granted',
            tenantId: user.id,
            actor: SYSTEM,
            ip: null,
            metadata: { via: 'release_task', user_id: user.id },
          },
          trx,
        );
        return 'granted' as const;
      });
    },

    async signInWithOAuth(identity, ctx) {
      const linked = await findIdentity(db, identity.provider, identity.providerUserId);
      let user: UserRow | undefined;
      if (linked) {
        user = await findUserById(db, linked.user_id);
      } else {
        // Only a provider-verified address may link to or create an account.
        const candidates = identity.primaryEmail
          ? [identity.primaryEmail, ...identity.verifiedEmails.filter((e) => e !== identity.primaryEmail)]
          : identity.verifiedEmails;
        if (candidates.length === 0) {
          throw new AppError('forbidden', 'your GitHub account has no verified email address');
        }
        user = await db.transaction().execute(async (trx) => {
          for (const email of candidates) {
            const existing = await findUserByEmail(trx, email);
            if (existing) {
              // An unverified account's password was chosen by someone who never proved
              // they own the address; the provider just proved the signer-in does. Keep
              // the account, drop that password and its sessions (no pre-hijacking).
              const unproven = existing.email_verified_at === null && existing.password_hash !== null;
              if (unproven) {
                await clearPasswordHash(trx, existing.id);
                await deps.sessions.endAllForUser(existing.id, null, trx);
              }
              await insertIdentity(trx, existing.id, { ...identity, email });
              await audit.record(
                {
                  type: 'auth.oauth.linked',
                  tenantId: existing.id,
                  actor: userActor(existing.id),
                  ip: ctx.ip,
                  metadata: { provider: identity.provider, email, password_cleared: unproven },
                },
                trx,
              );
              const verified = await markVerified(trx, existing.id);
              return verified
                ? await afterVerified(trx, verified, ctx, `oauth_${identity.provider}`)
                : existing;
            }
          }
          const email = candidates[0]!;
          if (!config.registration.enabled) {
            throw new AppError('registration_closed', 'registration is closed on this instance');
          }
          if (!domainAllowed(email)) {
            throw new AppError('forbidden', 'this email domain is not allowed to register here');
          }
          const created = await insertUser(trx, { email, passwordHash: null, verified: true });
          if (!created)
            throw new AppError('conflict', 'an account with this email was just created; try again');
          await insertIdentity(trx, created.id, { ...identity, email });
          await deps.tenantKeys.ensureTenantKey(created.id, trx);
          await deps.trials?.startTrial(trx, created.id);
          await audit.record(
            {
              type: 'user.registered',
              tenantId: created.id,
              actor: userActor(created.id),
              ip: ctx.ip,
              metadata: { via: `oauth_${identity.provider}` },
            },
            trx,
          );
          return await afterVerified(trx, created, ctx, `oauth_${identity.provider}`);
        });
      }
      if (!user) throw new AppError('unauthorized', 'sign-in failed');
      if (user.suspended_at !== null) {
        await deps.sessions.endAllForUser(user.id);
        throw new AppError('account_unavailable', 'this account cannot sign in; contact support');
      }
      return user;
    },
  };
}
