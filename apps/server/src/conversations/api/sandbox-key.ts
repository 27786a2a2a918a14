// The sandbox key: the conversation-scoped API key a sandbox holds as PADDOCK_TOKEN
// (callback-key.ts). This module is its one rule under /api/conversations (docs/security.md,
// "The sandbox key"); every route of the conversations API asks it, and nothing else decides
// what the key may do there. A prompt-injected agent holds this key, so the rule gives it no
// more than its sandbox holds already:
//
// 1. Reads (list, get, turns, events, stream): its own conversation and its descendants (the
//    sub-conversations it started, theirs, and so on); any other id answers 404 exactly like a
//    missing one, and the list holds only those conversations.
// 2. Starts sub-conversations only with what its sandbox holds: agents on the same environment
//    as its own agent (or both on none) and its own vault or none. More only when the owner
//    delegates it on the agent (`delegate_agent_ids`): a delegated agent may be started with any
//    vault on that agent's allowlist. 403 `agent_not_delegated` / `vault_not_delegated`.
// 3. Bounded: a sub-conversation is at most MAX_DEPTH levels below a conversation a person or
//    a full key started (403 `sub_conversation_depth_exceeded`), a conversation has at most
//    MAX_LIVE_CHILDREN children with a live sandbox (429 `sub_conversation_limit_exceeded`,
//    Retry-After), and every child takes one of the owner's concurrent sandboxes (gates.ts).
//    The child bound is checked inside the admitting transaction, after the per-user lock, so
//    parallel starts of one key cannot pass it together.
// 4. Interrupts, terminates and deletes its descendants only: its own conversation is 403 (the
//    owner ends it), anything it cannot read 404. It never prompts (403, auth.plugin.ts). It
//    deletes a descendant only once that one has no sub-conversations left (409 `conflict`):
//    deleting a conversation unlinks its children (ON DELETE SET NULL), which would take them
//    out of the key's reach and out from under the depth bound.
//
// Tests: sandbox-key.http.test.ts (every route × the key of A against A, A's child, A's parent,
// a sibling, another account; the admission rules and bounds).
import type { FastifyRequest } from 'fastify';
import { sql, type Transaction } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { AppError } from '../../http/errors.ts';
import { isUuid } from '../../resources/fields.ts';
import type { AgentSnapshot } from '../contracts.ts';
import { LIVE_SANDBOX_STATUSES } from '../conversations.tables.ts';

/**
 * How many levels of sub-conversations a tree may have below the conversation a person or a
 * full key started. Three is an orchestrator's workers and their helpers; a deeper chain is a
 * loop of an agent starting itself, which this ends.
 */
export const MAX_DEPTH = 3;
/**
 * Children with a live sandbox one conversation may have at once. With the default quota of 5
 * sandboxes per user, the parent and its 3 children leave the owner a sandbox of their own.
 */
export const MAX_LIVE_CHILDREN = 3;
/** Seconds a refused start should wait: a child's turn, or its idle reclaim, frees a slot. */
export const CHILD_LIMIT_RETRY_AFTER_SECONDS = 30;

/** A conversation-scoped principal: the sandbox key of `conversationId`. */
type SandboxKey = Principal & { scope: 'conversation'; conversationId: string };

export function isSandboxKey(principal: Principal): principal is SandboxKey {
  return principal.scope === 'conversation' && principal.conversationId !== null;
}

/**
 * How far below `root` the conversation `id` is: 0 for itself, n for a descendant n levels
 * down, null when it is not in root's tree (or is not the tenant's).
 */
async function levelBelow(db: Db, tenantId: string, root: string, id: string): Promise<number | null> {
  const res = await sql<{ depth: number }>`
    WITH RECURSIVE up(id, parent, depth) AS (
      SELECT id, parent_conversation_id, 0 FROM conversations WHERE tenant_id = ${tenantId} AND id = ${id}
      UNION ALL
      SELECT c.id, c.parent_conversation_id, up.depth + 1
        FROM conversations c JOIN up ON c.id = up.parent WHERE c.tenant_id = ${tenantId}
    )
    SELECT depth FROM up WHERE id = ${root} LIMIT 1`.execute(db);
  return res.rows[0]?.depth ?? null;
}

/** How many ancestors the conversation has (0: a person or a full key started it). */
async function depthOf(db: Db, tenantId: string, id: string): Promise<number> {
  const res = await sql<{ depth: number }>`
    WITH RECURSIVE up(id, parent, depth) AS (
      SELECT id, parent_conversation_id, 0 FROM conversations WHERE tenant_id = ${tenantId} AND id = ${id}
      UNION ALL
      SELECT c.id, c.parent_conversation_id, up.depth + 1
        FROM conversations c JOIN up ON c.id = up.parent WHERE c.tenant_id = ${tenantId}
    )
    SELECT max(depth) AS depth FROM up`.execute(db);
  return Number(res.rows[0]?.depth ?? 0);
}

/** The ids of `root`'s tree (itself and its descendants), for the list's filter. */
export function treeOf(tenantId: string, root: string) {
  return sql<string>`(
    WITH RECURSIVE down(id) AS (
      SELECT id FROM conversations WHERE tenant_id = ${tenantId} AND id = ${root}
      UNION ALL
      SELECT c.id FROM conversations c JOIN down ON c.parent_conversation_id = down.id
        WHERE c.tenant_id = ${tenantId}
    )
    SELECT id FROM down)`;
}

export interface SandboxKeyRule {
  /** preValidation hook of a reading route (`:id`): 404 unless the key reads that conversation. */
  reads(request: FastifyRequest): Promise<void>;
  /** preValidation hook of interrupt and terminate: 404/403 unless `:id` is a descendant. */
  controls(request: FastifyRequest): Promise<void>;
  /** preValidation hook of delete: controls(), and 409 while `:id` has sub-conversations. */
  deletes(request: FastifyRequest): Promise<void>;
  /** Whether the principal reads the conversation `id` (a full credential: every one of its tenant). */
  mayRead(principal: Principal, id: string): Promise<boolean>;
  /** The conversation whose tree the list is cut to; null for a full credential (the whole tenant). */
  listRoot(principal: Principal): string | null;
  /** Rules 2 and 3 (depth) for a start by a sandbox key; nothing for a full credential. */
  admitChild(principal: Principal, agent: AgentSnapshot, vaultId: string | null): Promise<void>;
  /** Rule 3 (live children) inside the admitting transaction, after gates.admit took the user lock. */
  admitChildSandbox(trx: Transaction<Database>, principal: Principal): Promise<void>;
}

const idOf = (request: FastifyRequest): string => (request.params as { id?: string }).id ?? '';
const principalIn = (request: FastifyRequest): Principal => {
  if (!request.principal) throw new AppError('unauthorized', 'authentication required');
  return request.principal;
};

export function createSandboxKeyRule(deps: { db: Db }): SandboxKeyRule {
  const { db } = deps;

  const level = async (key: SandboxKey, id: string) =>
    isUuid(id) ? await levelBelow(db, key.tenantId, key.conversationId, id) : null;

  const notDelegated = () =>
    new AppError(
      'agent_not_delegated',
      "a sandbox may start sub-conversations only on agents of its own agent's environment, or on agents its agent delegates (delegate_agent_ids)",
    );

  /** The key, once `:id` is one of its descendants (null: a full credential, nothing to check). */
  const descendant = async (request: FastifyRequest): Promise<SandboxKey | null> => {
    const principal = principalIn(request);
    if (!isSandboxKey(principal)) return null;
    const below = await level(principal, idOf(request));
    if (below === null) throw AppError.notFound('conversation');
    if (below === 0)
      throw new AppError(
        'forbidden',
        'a sandbox key cannot interrupt, terminate or delete its own conversation; only the sub-conversations it started',
      );
    return principal;
  };

  return {
    async reads(request) {
      const principal = principalIn(request);
      if (!isSandboxKey(principal)) return;
      if ((await level(principal, idOf(request))) === null) throw AppError.notFound('conversation');
    },

    async controls(request) {
      await descendant(request);
    },

    async deletes(request) {
      const key = await descendant(request);
      if (!key) return;
      const child = await db
        .selectFrom('conversations')
        .select('id')
        .where('tenant_id', '=', key.tenantId)
        .where('parent_conversation_id', '=', idOf(request))
        .limit(1)
        .executeTakeFirst();
      if (child)
        throw new AppError(
          'conflict',
          'this conversation has sub-conversations of its own; delete those first',
        );
    },

    async mayRead(principal, id) {
      if (!isSandboxKey(principal)) return true;
      return (await level(principal, id)) !== null;
    },

    listRoot(principal) {
      return isSandboxKey(principal) ? principal.conversationId : null;
    },

    async admitChild(principal, agent, vaultId) {
      if (!isSandboxKey(principal)) return;
      const tenantId = principal.tenantId;
      const parent = await db
        .selectFrom('conversations as c')
        .leftJoin('agents as a', (j) =>
          j.onRef('a.id', '=', 'c.agent_id').onRef('a.tenant_id', '=', 'c.tenant_id'),
        )
        .select(['c.agent_id', 'c.vault_id', 'a.environment_id'])
        .where('c.tenant_id', '=', tenantId)
        .where('c.id', '=', principal.conversationId)
        .executeTakeFirst();
      // The key of a conversation deleted a moment ago (its key is revoked with it).
      if (!parent) throw AppError.notFound('conversation');
      const parentAgent = parent.agent_id;
      if (parentAgent === null) throw notDelegated();
      const delegated =
        (await db
          .selectFrom('agent_delegates')
          .select('delegate_agent_id')
          .where('tenant_id', '=', tenantId)
          .where('agent_id', '=', parentAgent)
          .where('delegate_agent_id', '=', agent.id)
          .executeTakeFirst()) !== undefined;
      if (!delegated) {
        if (agent.environmentId !== parent.environment_id) throw notDelegated();
        if (vaultId !== null && vaultId !== parent.vault_id)
          throw new AppError(
            'vault_not_delegated',
            "a sandbox may start a sub-conversation only with its own conversation's vault or none, unless its agent delegates that agent",
          );
      }
      if ((await depthOf(db, tenantId, principal.conversationId)) + 1 > MAX_DEPTH)
        throw new AppError(
          'sub_conversation_depth_exceeded',
          `sub-conversations may be at most ${MAX_DEPTH} levels deep; this one would be deeper`,
          { extra: { limit: MAX_DEPTH } },
        );
    },

    async admitChildSandbox(trx, principal) {
      if (!isSandboxKey(principal)) return;
      const live = await trx
        .selectFrom('sandboxes as s')
        .innerJoin('conversations as c', 'c.id', 's.conversation_id')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('c.tenant_id', '=', principal.tenantId)
        .where('c.parent_conversation_id', '=', principal.conversationId)
        .where('s.status', 'in', LIVE_SANDBOX_STATUSES)
        .executeTakeFirstOrThrow();
      if (Number(live.n) >= MAX_LIVE_CHILDREN)
        throw new AppError(
          'sub_conversation_limit_exceeded',
          `a conversation may have at most ${MAX_LIVE_CHILDREN} sub-conversations with a live sandbox; terminate one or wait`,
          {
            headers: { 'retry-after': String(CHILD_LIMIT_RETRY_AFTER_SECONDS) },
            extra: { limit: MAX_LIVE_CHILDREN },
          },
        );
    },
  };
}
