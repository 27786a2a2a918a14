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
import { sql } from 'kysely';
import type { AuditEntry, AuditService } from '../audit/audit.service.ts';
import type { ApiKeysService, CreatedApiKey } from '../auth/api-keys.service.ts';
import type { Principal } from '../auth/principal.ts';
import type { PrincipalCache } from '../auth/principal-cache.ts';
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
  findIdentity,
  findUserByEmail,
  findUserById,
  insertIdentity,
  insertUser,
  listUsers,
  markVerified,
  setAdmin,
  setEmail,
  setPasswordHash,
  setSuspended,
  type UserRow,
} from './accounts.repo.ts';
import { hashPassword, passwordProblems, verifyPassword } from './password.ts';

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
  /** Checks email + password and the account state; returns the user allowed to sign in. */
  authenticate(input: { email: string; password: string }, ctx: RequestContext): Promise<UserRow>;
  mintKeyWithPassword(
    input: { email: string; password: string; name: string; expiresInDays?: number | null },
    ctx: RequestContext,
  ): Promise<CreatedApiKey>;
  changePassword(
    principal: Principal,
    input: { currentPassword: string; newPassword: string },
    ctx: RequestContext,
  ): Promise<{ sessionsEnded: number }>;
  requestPasswordReset(email: string, ctx: RequestContext): Promise<void>;
  confirmPasswordReset(input: { token: string; password: string }, ctx: RequestContext): Promise<void>;
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
    opts: { limit: number; cursor?: string },
    ctx: RequestContext,
  ): Promise<{
    data: UserView[];
    meta: { next_cursor: string | null; has_more: boolean };
  }>;
  setSuspended(admin: Principal, userId: string, suspended: boolean, ctx: RequestContext): Promise<UserView>;
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
  apiKeys: Pick<ApiKeysService, 'create'>;
  /** Told after a suspension commits, so this replica stops honouring the user's keys at once. */
  principals: Pick<PrincipalCache, 'forget'>;
  /** Creates the tenant's data encryption key; called in the registration transaction. */
  tenantKeys: { ensureTenantKey(tenantId: string, db?: Db): Promise<void> };
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

  async function checkPasswordAndState(
    email: string,
    password: string,
    ctx: RequestContext,
  ): Promise<UserRow> {
    const user = await findUserByEmail(db, email);
    const ok = await verifyPassword(user?.password_hash ?? null, password);
    if (!ok || !user) {
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
      const user = await findUserByEmail(db, email.trim());
      if (!user || user.email_verified_at !== null || user.suspended_at !== null) return;
      await mailQueue.enqueue(db, { kind: 'verification', userId: user.id });
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
      return await db.transaction().execute(async (trx) => {
        await setPasswordHash(trx, user.id, hash);
        const ended = await deps.sessions.endAllForUser(user.id, principal.sessionId, trx);
        await audit.record(
          {
            type: 'user.password_changed',
            tenantId: user.id,
            actor: principalActor(principal),
            ip: ctx.ip,
            metadata: { sessions_ended: ended },
          },
          trx,
        );
        return { sessionsEnded: ended };
      });
    },

    async requestPasswordReset(email, ctx) {
      const user = await findUserByEmail(db, email.trim());
      if (!user || user.suspended_at !== null) return;
      await db.transaction().execute(async (trx) => {
        await audit.record(
          { type: 'user.password_reset_requested', tenantId: user.id, actor: SYSTEM, ip: ctx.ip },
          trx,
        );
        await mailQueue.enqueue(trx, { kind: 'password_reset', userId: user.id });
      });
    },

    async confirmPasswordReset(input, ctx) {
      assertPasswordPolicy(input.password, 'password');
      const hash = await hashPassword(input.password);
      await db.transaction().execute(async (trx) => {
        const claimed = await consumeEmailToken(trx, 'password_reset', input.token);
        if (!claimed) throw AppError.validation({ token: ['is invalid, already used or expired'] });
        const user = await findUserById(trx, claimed.user_id);
        if (!user || user.suspended_at !== null) {
          throw AppError.validation({ token: ['is invalid, already used or expired'] });
        }
        await setPasswordHash(trx, user.id, hash);
        await expireEmailTokens(trx, user.id, 'password_reset');
        const ended = await deps.sessions.endAllForUser(user.id, null, trx);
        await audit.record(
          {
            type: 'user.password_reset',
            tenantId: user.id,
            actor: userActor(user.id),
            ip: ctx.ip,
            metadata: { sessions_ended: ended },
          },
          trx,
        );
        // The reset link proves control of the mailbox, which is what verification proves.
        const verified = await markVerified(trx, user.id);
        if (verified) await afterVerified(trx, verified, ctx, 'password_reset');
      });
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
      if (await findUserByEmail(db, newEmail)) {
        throw AppError.validation({ new_email: ['is already registered'] });
      }
      return await db.transaction().execute(async (trx) => {
        const actor = principalActor(principal);
        if (!mailQueue.enabled) {
          // EMAIL_DELIVERY=none: no link can be sent; addresses are trusted as at registration.
          if (!(await setEmail(trx, user.id, newEmail))) {
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
        await mailQueue.enqueue(trx, { kind: 'email_change_confirm', userId: user.id, newEmail });
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
      const rows = await listUsers(db, { limit: opts.limit + 1, ...(afterId ? { afterId } : {}) });
      const page = rows.slice(0, opts.limit);
      const hasMore = rows.length > opts.limit;
      // A cross-tenant read by an admin is itself audited, in the admin's own log.
      await audit.record({
        type: 'admin.users.listed',
        tenantId: admin.userId,
        actor: principalActor(admin),
        ip: ctx.ip,
        metadata: { count: page.length },
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
          if (suspended) await deps.sessions.endAllForUser(userId, null, trx);
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
