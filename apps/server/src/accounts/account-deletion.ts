// Account deletion: one path for the person (DELETE /api/account), an admin
// (DELETE /api/admin/users/:id) and the unverified-account pruner. Invariants
// (test/accounts.deletion.test.ts):
// - Everything of the tenant goes in one transaction that first locks the users row: every
//   tenant table references users (directly or through a parent) ON DELETE CASCADE, or is
//   listed in TENANT_ROWS_WITHOUT_CASCADE (account-deletion.repo.ts), and a row that references
//   the locked users row cannot be inserted meanwhile, so none appears after the delete. A
//   write that waited on the lock fails its foreign key check and is answered 401
//   (referencesDeletedAccount, http/app.ts), never 500.
// - That includes the tenant's wrapped data key (tenant_keys): no copy of the tenant's
//   ciphertexts outside the deleted rows can be opened with the master key any more.
// - Every live sandbox's destroy is queued in that transaction (sandbox_destroys, a name
//   only) and done once it commits; the owner of each conversation is told to stop. A destroy
//   the backend does not confirm stays queued until it does: the one row the tenant id still
//   names after the deletion, besides its audit record.
// - What remains is one audit record of the deletion: who ordered it, how, and counts; never
//   the deleted person's email. The person's earlier audit events go with the account.
// - The deletion notice goes to a verified address only (a never-verified one may not be the
//   person's), enqueued in the transaction with the address in the job, the only place the
//   address outlives the account, until the mail job runs.
// - Hooks run before the transaction, and only for an account that exists and qualifies, so a
//   failing one (billing cancellation) deletes nothing.
import type { AuditEntry, AuditService } from '../audit/audit.service.ts';
import type { Principal, PrincipalCache } from '../auth/principal.ts';
import type { ConversationsService } from '../conversations/api/conversations.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import type { MailQueue } from '../mail/mail.queue.ts';
import { deleteTenantRows } from './account-deletion.repo.ts';
import { findUserById, lockUser, type UserRow } from './accounts.repo.ts';
import type { RequestContext } from './accounts.service.ts';
import { verifyPassword } from './password.ts';
import { clearLoginFailures } from './throttles.repo.ts';

/**
 * A step of another domain that must happen before an account's rows go, outside the deletion
 * transaction (it may call a service outside the machine). A throw stops the deletion before
 * anything is deleted. Billing cancellation joins here when billing lands.
 */
export interface AccountDeletionHook {
  name: string;
  beforeDelete(userId: string): Promise<void>;
}

export type DeletionVia = 'self' | 'admin' | 'unverified_prune';

export interface AccountDeletion {
  /** DELETE /api/account: the account's email typed again and, for a password account, the password. */
  deleteOwn(
    principal: Principal,
    input: { confirmEmail: string; currentPassword?: string | undefined },
    ctx: RequestContext,
  ): Promise<void>;
  /** DELETE /api/admin/users/:id. Not for the admin's own account (that is DELETE /api/account). */
  deleteByAdmin(admin: Principal, userId: string, ctx: RequestContext): Promise<void>;
  /**
   * The unverified-account pruner: deletes the account if, on its locked row, it is still
   * unverified and was registered at or before `registeredBy`. False when it no longer
   * qualifies (verified meanwhile) or is already gone.
   */
  deleteUnverified(userId: string, registeredBy: Date): Promise<boolean>;
}

export interface AccountDeletionDeps {
  db: Db;
  audit: AuditService;
  mailQueue: MailQueue;
  principals: Pick<PrincipalCache, 'forget'>;
  conversations: Pick<ConversationsService, 'prepareTenantRemoval' | 'finishTenantRemoval'>;
  hooks: readonly AccountDeletionHook[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function principalActor(p: Principal): AuditEntry['actor'] {
  return p.via === 'api_key'
    ? { kind: 'api_key', userId: p.userId, apiKeyId: p.apiKeyId }
    : { kind: 'user', userId: p.userId, apiKeyId: null };
}

interface Order {
  via: DeletionVia;
  actor: AuditEntry['actor'];
  /** The orderer's IP when it is not the deleted person (an admin's); null otherwise. */
  ip: string | null;
  extra?: Record<string, unknown>;
  /** Re-checked on the locked row: false leaves the account as it is. */
  stillQualifies?: (user: UserRow) => boolean;
}

export function createAccountDeletion(deps: AccountDeletionDeps): AccountDeletion {
  const { db, audit, mailQueue } = deps;

  /** The one deletion path. Null when the account is gone or no longer qualifies. */
  async function erase(userId: string, order: Order): Promise<true | null> {
    // Checked before the hooks too, so no hook acts for an account that is not deleted.
    const before = await findUserById(db, userId);
    if (!before || (order.stillQualifies && !order.stillQualifies(before))) return null;
    for (const hook of deps.hooks) await hook.beforeDelete(userId);
    const done = await db.transaction().execute(async (trx) => {
      const user = await lockUser(trx, userId);
      if (!user || (order.stillQualifies && !order.stillQualifies(user))) return null;
      const removal = await deps.conversations.prepareTenantRemoval(trx, userId);
      await deleteTenantRows(trx, userId);
      await clearLoginFailures(trx, user.email);
      await audit.record(
        {
          type: order.via === 'admin' ? 'admin.user.deleted' : 'user.deleted',
          tenantId: userId,
          actor: order.actor,
          ip: order.ip,
          metadata: {
            via: order.via,
            conversations: removal.conversationIds.length,
            sandboxes: removal.sandboxNames.length,
            ...order.extra,
          },
        },
        trx,
      );
      if (user.email_verified_at !== null) {
        await mailQueue.enqueue(trx, { kind: 'account_deleted', to: user.email });
      }
      return removal;
    });
    if (!done) return null;
    deps.principals.forget((p) => p.userId === userId);
    await deps.conversations.finishTenantRemoval(userId, done);
    return true;
  }

  return {
    // No ctx: the person's own IP is theirs, and the record keeps who and how, not where from.
    async deleteOwn(principal, input) {
      const user = await findUserById(db, principal.userId);
      if (!user) throw new AppError('unauthorized', 'missing or invalid credentials');
      if (input.confirmEmail.trim().toLowerCase() !== user.email.toLowerCase()) {
        throw AppError.validation({ confirm_email: ['does not match the email address of this account'] });
      }
      if (user.password_hash !== null) {
        if (!input.currentPassword) throw AppError.validation({ current_password: ['is required'] });
        if (!(await verifyPassword(user.password_hash, input.currentPassword))) {
          throw AppError.validation({ current_password: ['is incorrect'] });
        }
      }
      if (!(await erase(user.id, { via: 'self', actor: principalActor(principal), ip: null }))) {
        throw new AppError('unauthorized', 'missing or invalid credentials');
      }
    },

    async deleteByAdmin(admin, userId, ctx) {
      if (!UUID.test(userId)) throw AppError.notFound('user');
      if (userId === admin.userId) {
        throw AppError.validation({ id: ['delete your own account on the Account page'] });
      }
      const done = await erase(userId, {
        via: 'admin',
        actor: principalActor(admin),
        ip: ctx.ip,
        extra: { admin_user_id: admin.userId },
      });
      if (!done) throw AppError.notFound('user');
    },

    async deleteUnverified(userId, registeredBy) {
      const done = await erase(userId, {
        via: 'unverified_prune',
        actor: { kind: 'system', userId: null, apiKeyId: null },
        ip: null,
        stillQualifies: (u) => u.email_verified_at === null && u.created_at <= registeredBy,
      });
      return done !== null;
    },
  };
}
