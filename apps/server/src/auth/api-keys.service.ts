// API keys. Invariants (api-keys.http.test.ts):
// - A key is `pdk_` + 256 random bits; the plaintext is returned once, at creation, and
//   only its SHA-256 is stored. A revoked or expired key authenticates nothing.
// - `full` keys belong to people. `conversation` keys (the sandbox callback token) are
//   bound to one owner and one conversation, expire after 30 days, are accepted only by
//   routes that opt in (auth.plugin.ts), and are revoked together when the conversation
//   server stops (revokeConversationKeys).

import type { AuditEntry, AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { generateApiKey } from './api-key.ts';
import {
  type ApiKeyRow,
  insertApiKey,
  listApiKeys,
  revokeAllApiKeys,
  revokeApiKey,
  revokeKeysOfConversation,
} from './api-keys.repo.ts';
import type { PrincipalCache } from './principal.ts';

export const CONVERSATION_KEY_TTL_MS = 30 * 24 * 60 * 60 * 1000;

export interface ApiKeyView {
  id: string;
  name: string;
  prefix: string;
  scope: 'full' | 'conversation';
  conversation_id: string | null;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
}

export interface CreatedApiKey extends ApiKeyView {
  /** The plaintext key: shown once. */
  key: string;
}

export interface ApiKeysService {
  create(
    userId: string,
    input: { name: string; expiresInDays?: number | null },
    audit: { actor: AuditEntry['actor']; ip: string | null; via: string },
    db?: Db,
  ): Promise<CreatedApiKey>;
  list(userId: string): Promise<ApiKeyView[]>;
  revoke(
    userId: string,
    keyId: string,
    audit: { actor: AuditEntry['actor']; ip: string | null },
  ): Promise<void>;
  /**
   * Revokes every key of a user inside the caller's transaction, one audit row each.
   * The caller tells the principal cache after its transaction commits.
   */
  revokeAllForUser(
    userId: string,
    audit: { actor: AuditEntry['actor']; ip: string | null; via: string },
    db: Db,
  ): Promise<number>;
  mintConversationKey(userId: string, conversationId: string): Promise<CreatedApiKey>;
  revokeConversationKeys(conversationId: string): Promise<number>;
}

export function toApiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scope: row.scope,
    conversation_id: row.conversation_id,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
    expires_at: row.expires_at?.toISOString() ?? null,
  };
}

export function createApiKeysService(deps: {
  db: Db;
  audit: AuditService;
  /** Told after each revocation commits, so this replica stops honouring the key at once. */
  principals: Pick<PrincipalCache, 'forget'>;
}): ApiKeysService {
  return {
    async create(userId, input, ctx, db = deps.db) {
      const { key, prefix, hash } = generateApiKey();
      const expiresAt =
        input.expiresInDays == null ? null : new Date(Date.now() + input.expiresInDays * 24 * 60 * 60 * 1000);
      const row = await insertApiKey(db, userId, {
        name: input.name,
        prefix,
        hash,
        scope: 'full',
        conversationId: null,
        expiresAt,
      });
      await deps.audit.record(
        {
          type: 'api_key.created',
          tenantId: userId,
          actor: ctx.actor,
          ip: ctx.ip,
          metadata: { key_id: row.id, name: row.name, prefix: row.prefix, via: ctx.via },
        },
        db,
      );
      return { ...toApiKeyView(row), key };
    },

    async list(userId) {
      return (await listApiKeys(deps.db, userId)).map(toApiKeyView);
    },

    async revoke(userId, keyId, ctx) {
      await deps.db.transaction().execute(async (trx) => {
        const row = await revokeApiKey(trx, userId, keyId);
        if (!row) throw AppError.notFound('API key');
        await deps.audit.record(
          {
            type: 'api_key.revoked',
            tenantId: userId,
            actor: ctx.actor,
            ip: ctx.ip,
            metadata: { key_id: row.id, name: row.name, prefix: row.prefix },
          },
          trx,
        );
      });
      deps.principals.forget((p) => p.apiKeyId === keyId);
    },

    async revokeAllForUser(userId, ctx, db) {
      const rows = await revokeAllApiKeys(db, userId);
      for (const row of rows) {
        await deps.audit.record(
          {
            type: 'api_key.revoked',
            tenantId: userId,
            actor: ctx.actor,
            ip: ctx.ip,
            metadata: { key_id: row.id, name: row.name, prefix: row.prefix, via: ctx.via },
          },
          db,
        );
      }
      return rows.length;
    },
    async mintConversationKey(userId, conversationId) {
      const { key, prefix, hash } = generateApiKey();
      const row = await insertApiKey(deps.db, userId, {
        name: `conversation ${conversationId}`,
        prefix,
        hash,
        scope: 'conversation',
        conversationId,
        expiresAt: new Date(Date.now() + CONVERSATION_KEY_TTL_MS),
      });
      return { ...toApiKeyView(row), key };
    },

    async revokeConversationKeys(conversationId) {
      const revoked = await revokeKeysOfConversation(deps.db, conversationId);
      deps.principals.forget((p) => p.conversationId === conversationId);
      return revoked;
    },
  };
}
