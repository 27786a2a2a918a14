// The sandbox's key for calls back into the service (spec: "The callback token given to a
// sandbox is a scoped, expiring API key (30-day expiry). It is revoked when the conversation
// server stops").
//
// Invariants:
// - A conversation has at most one live callback key: minting one revokes the ones before it
//   (a reattaching owner replaces the key of an owner that died without revoking its own).
// - The key is conversation-scoped (auth.plugin.ts: only routes that opt in accept it) and
//   expires after CONVERSATION_KEY_TTL_MS; its plaintext lives in the owner's memory and the
//   sandbox only.
// - The callback URL is SANDBOX_CALLBACK_URL (default PUBLIC_URL): the address at which a
//   sandbox reaches this service, which is not always the one a browser uses.
import type { ApiKeysService } from '../../auth/api-keys.service.ts';

export interface CallbackKey {
  id: string;
  key: string;
  baseUrl: string;
}

export interface CallbackKeys {
  mint(tenantId: string, conversationId: string): Promise<CallbackKey>;
  revoke(conversationId: string): Promise<void>;
}

export function createCallbackKeys(deps: {
  apiKeys: Pick<ApiKeysService, 'mintConversationKey' | 'revokeConversationKeys'>;
  callbackUrl: URL | string;
}): CallbackKeys {
  const baseUrl = String(deps.callbackUrl).replace(/\/$/, '');
  return {
    async mint(tenantId, conversationId) {
      await deps.apiKeys.revokeConversationKeys(conversationId);
      const created = await deps.apiKeys.mintConversationKey(tenantId, conversationId);
      return { id: created.id, key: created.key, baseUrl };
    },
    async revoke(conversationId) {
      await deps.apiKeys.revokeConversationKeys(conversationId);
    },
  };
}
