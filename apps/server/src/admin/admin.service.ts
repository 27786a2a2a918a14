// The admin's cross-tenant reads: one account's metadata, its conversations, one
// conversation. Invariant: every read is audited in the admin's own log before its answer
// leaves (admin.user.read, admin.conversations.listed, admin.conversation.read, naming the
// target), and nothing read carries content (admin.repo.ts, admin.schema.ts). Proved by
// test/admin.views.test.ts.
import { findUserById } from '../accounts/accounts.repo.ts';
import { type RequestContext, toUserView } from '../accounts/accounts.service.ts';
import type { AuditService } from '../audit/audit.service.ts';
import { auditActorFrom } from '../audit/audit.service.ts';
import type { Principal } from '../auth/principal.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { isUuid } from '../resources/fields.ts';
import {
  accountCounts,
  type ConversationMetadataRow,
  findConversationMetadata,
  lastActivity,
  latestSandboxMetadata,
  listConversationMetadata,
  turnMetadata,
} from './admin.repo.ts';
import type {
  AdminConversationDetailT,
  AdminConversationT,
  AdminUserDetailT,
  UntrackedSandboxesT,
} from './admin.schema.ts';

export interface AdminService {
  user(admin: Principal, userId: string, ctx: RequestContext): Promise<AdminUserDetailT>;
  conversations(
    admin: Principal,
    userId: string,
    page: { limit: number; cursor?: string },
    ctx: RequestContext,
  ): Promise<{ data: AdminConversationT[]; meta: { next_cursor: string | null; has_more: boolean } }>;
  conversation(
    admin: Principal,
    conversationId: string,
    ctx: RequestContext,
  ): Promise<AdminConversationDetailT>;
  /** The sandbox reaper's report (no tenant's data: backend names no row knows). */
  untrackedSandboxes(): Promise<UntrackedSandboxesT>;
}

/** The admin page shows at most this many untracked sandboxes (oldest first); the log has every one. */
const UNTRACKED_SHOWN = 500;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

function conversationView(r: ConversationMetadataRow): AdminConversationT {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    agent_id: r.agent_id,
    agent_name: r.agent_name,
    runtime: r.runtime,
    vault_id: r.vault_id,
    status: r.status,
    source: r.source,
    parent_conversation_id: r.parent_conversation_id,
    turn_count: Number(r.turn_count ?? 0),
    log_bytes: Number(r.log_bytes),
    log_truncated: r.log_truncated,
    created_at: r.created_at.toISOString(),
    last_activity_at: r.last_activity_at.toISOString(),
  };
}

export function createAdminService(deps: { db: Db; audit: Pick<AuditService, 'record'> }): AdminService {
  const { db, audit } = deps;
  const record = (admin: Principal, ctx: RequestContext, type: string, metadata: Record<string, unknown>) =>
    audit.record({ type, tenantId: admin.tenantId, actor: auditActorFrom(admin), ip: ctx.ip, metadata });

  return {
    async user(admin, userId, ctx) {
      const user = isUuid(userId) ? await findUserById(db, userId) : undefined;
      if (!user) throw AppError.notFound('user');
      const [counts, last] = await Promise.all([accountCounts(db, user.id), lastActivity(db, user.id)]);
      await record(admin, ctx, 'admin.user.read', { target_user_id: user.id });
      return { user: toUserView(user), counts, last_activity_at: iso(last) };
    },

    async conversations(admin, userId, page, ctx) {
      if (!isUuid(userId) || !(await findUserById(db, userId))) throw AppError.notFound('user');
      let beforeId: string | undefined;
      if (page.cursor) {
        beforeId = Buffer.from(page.cursor, 'base64url').toString('utf8');
        if (!isUuid(beforeId)) throw AppError.validation({ cursor: ['is not a valid cursor'] });
      }
      const rows = await listConversationMetadata(db, userId, {
        limit: page.limit + 1,
        ...(beforeId ? { beforeId } : {}),
      });
      const data = rows.slice(0, page.limit).map(conversationView);
      const hasMore = rows.length > page.limit;
      await record(admin, ctx, 'admin.conversations.listed', { target_user_id: userId, count: data.length });
      const last = data.at(-1);
      return {
        data,
        meta: {
          next_cursor: hasMore && last ? Buffer.from(last.id, 'utf8').toString('base64url') : null,
          has_more: hasMore,
        },
      };
    },

    async conversation(admin, conversationId, ctx) {
      const row = isUuid(conversationId) ? await findConversationMetadata(db, conversationId) : undefined;
      if (!row) throw AppError.notFound('conversation');
      const [owner, sandbox, turns] = await Promise.all([
        findUserById(db, row.tenant_id),
        latestSandboxMetadata(db, row.id),
        turnMetadata(db, row.id),
      ]);
      await record(admin, ctx, 'admin.conversation.read', {
        target_user_id: row.tenant_id,
        conversation_id: row.id,
      });
      return {
        ...conversationView(row),
        owner_email: owner?.email ?? null,
        sandbox: sandbox
          ? {
              status: sandbox.status,
              created_at: sandbox.created_at.toISOString(),
              ready_at: iso(sandbox.ready_at),
              ended_at: iso(sandbox.ended_at),
            }
          : null,
        turns: turns.map((t) => ({
          seq: t.seq,
          status: t.status,
          exit_code: t.exit_code,
          usage: t.usage ?? null,
          created_at: t.created_at.toISOString(),
          started_at: iso(t.started_at),
          ended_at: iso(t.ended_at),
        })),
      };
    },

    async untrackedSandboxes() {
      const rows = await db
        .selectFrom('untracked_sandboxes')
        .select(['name', 'first_seen_at', 'last_seen_at'])
        .orderBy('first_seen_at')
        .orderBy('name')
        .limit(UNTRACKED_SHOWN)
        .execute();
      return {
        data: rows.map((r) => ({
          name: r.name,
          first_seen_at: r.first_seen_at.toISOString(),
          last_seen_at: r.last_seen_at.toISOString(),
        })),
      };
    },
  };
}
