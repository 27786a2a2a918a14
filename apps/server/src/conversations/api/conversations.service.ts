// Conversations as the API sees them: admission through the gates, the state checks of each
// command (busy, terminated, failed, provisioning) decided in one transaction on the locked
// conversation row, then a command to the conversation's owner (commands.ts). The common
// follow-up (idle, warm, nothing to refuse) is one statement instead (queueWarmTurn), whose
// conditions are the ones under which that transaction would take the prompt.
//
// What must hold (conversations.lifecycle.test.ts, conversations.routes.test.ts):
// - A prompt while a turn is queued or runs is 409 conversation_busy (one that comes after the
//   turn's end was streamed but before the owner marked the conversation idle is taken: test
//   "a client that sees a turn end on the stream may prompt at once"); to a terminated conversation 410
//   conversation_terminated; to a failed one 409 conversation_failed; while the conversation
//   provisions 503 conversation_provisioning with Retry-After (interrupt and terminate too);
//   DELETE always executes.
// - Every accepted prompt resets the idle clock (last_activity_at) in the accepting transaction.
// - A follow-up prompt to a conversation whose sandbox is gone re-admits a sandbox through the
//   quota in the same transaction that queues the turn.
// - A conversation stores at most CONVERSATION_INPUT_MAX_BYTES of prompts and images (counted
//   in `input_bytes` by the statement that queues the turn); a prompt beyond is 409
//   conversation_storage_exceeded, checked on the locked row (test: "bounds the bytes of
//   prompts and images a conversation stores").
// - What a sandbox key may do here is sandbox-key.ts's rule, asked at each step it names; the
//   prompt and title of a sub-conversation it starts are stored redacted with the values of its
//   lineage (lineage-secrets.ts) and with the key itself.
import { randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/database.ts';
import { AppError } from '../../http/errors.ts';
import type { InferenceCredentialsService } from '../../inference-credentials/inference-credentials.service.ts';
import type { Logger } from '../../observability/logger.ts';
import { isUuid } from '../../resources/fields.ts';
import type { TurnImage } from '../contracts.ts';
import type { ConversationSource } from '../conversations.tables.ts';
import type { Command, EngineCommands } from '../engine/commands.ts';
import { createSecretRegistry } from '../log/redactor.ts';
import { type LineageDeps, lineageSecretValues } from '../provisioning/lineage-secrets.ts';
import {
  type ConversationFilters,
  type ConversationRow,
  deleteConversation,
  findConversation,
  findLiveSandbox,
  findRunningTurn,
  insertSandbox,
  insertStartedConversation,
  insertTurn,
  listConversations,
  listPullRequests,
  listTurns,
  lockConversation,
  queueTenantDestroys,
  queueWarmTurn,
  setConversationStatus,
  type TurnRow,
  turnInputBytes,
} from './conversations.repo.ts';
import {
  CONVERSATION_INPUT_MAX_BYTES,
  type ConversationView,
  type TurnView,
} from './conversations.schemas.ts';
import type { Gates } from './gates.ts';
import { decodeImages } from './images.ts';
import { isSandboxKey, type SandboxKeyRule } from './sandbox-key.ts';

export const PROVISIONING_RETRY_AFTER_SECONDS = 5;
const TITLE_MAX = 80;

export interface Caller {
  principal: Principal;
  /** The X-Paddock-Client header, when sent. */
  client: string | undefined;
  /** The bearer key presented, if any: a sandbox key is redacted from what it writes. */
  bearer: string | null;
}

interface ImageInput {
  media_type: string;
  data: string;
}

export interface ConversationsService {
  create(
    caller: Caller,
    input: {
      agent_id: string;
      vault_id?: string | null | undefined;
      prompt: string;
      images?: ImageInput[] | undefined;
    },
  ): Promise<ConversationView>;
  /** `tree` (sandbox-key.ts listRoot): only that conversation and its descendants. */
  list(
    tenantId: string,
    query: ConversationFilters & { limit: number; cursor?: string | undefined },
  ): Promise<{ data: ConversationView[]; meta: { next_cursor: string | null; has_more: boolean } }>;
  get(tenantId: string, id: string): Promise<ConversationView>;
  turns(tenantId: string, id: string): Promise<TurnView[]>;
  prompt(
    tenantId: string,
    id: string,
    input: { prompt: string; images?: ImageInput[] | undefined },
  ): Promise<TurnView>;
  interrupt(tenantId: string, id: string): Promise<TurnView>;
  terminate(tenantId: string, id: string): Promise<ConversationView>;
  remove(tenantId: string, id: string): Promise<void>;
  /**
   * Account deletion, inside its transaction (the users row locked): queues the destroy of
   * every live sandbox of the tenant, committed with the deletion, so a process that dies
   * before finishTenantRemoval leaves the destroys owed, not forgotten.
   */
  prepareTenantRemoval(trx: Db, tenantId: string): Promise<TenantRemoval>;
  /**
   * Once the deletion committed: tells every conversation's owner (it stops and destroys, as
   * for a conversation's delete) and destroys the sandboxes here too; a destroy the backend
   * does not confirm stays queued and the lifecycle clock retries it.
   */
  finishTenantRemoval(tenantId: string, removal: TenantRemoval): Promise<void>;
}

/** What an account's deletion leaves the conversation engine to do once committed. */
export interface TenantRemoval {
  conversationIds: string[];
  sandboxNames: string[];
}

/** `paddock-<first 8 hex of the tenant id>-<8 random hex>`. */
export function sandboxName(tenantId: string): string {
  return `paddock-${tenantId.replace(/-/g, '').slice(0, 8)}-${randomBytes(4).toString('hex')}`;
}

/**
 * First line of the first prompt, without a Markdown heading's leading `#`s, whitespace collapsed,
 * at most 80 characters (… when cut).
 */
export function titleOf(prompt: string): string {
  const line = (prompt.trim().split('\n')[0] ?? '')
    .replace(/^#{1,6}\s+/, '')
    .replace(/\s+/g, ' ')
    .trim();
  const chars = [...line];
  return chars.length <= TITLE_MAX ? line : `${chars.slice(0, TITLE_MAX - 1).join('')}…`;
}

export function sourceOf(caller: Caller): { source: ConversationSource; parent: string | null } {
  const p = caller.principal;
  if (p.scope === 'conversation') return { source: 'sandbox', parent: p.conversationId };
  if (p.via === 'session') return { source: 'ui', parent: null };
  if (caller.client?.trim().toLowerCase() === 'cli') return { source: 'cli', parent: null };
  return { source: 'api', parent: null };
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The lifecycle bounds of a sandbox (lifecycle.ts), for the view's `expires_at` fields; 0 = off. */
export interface SandboxBounds {
  idleTimeoutMinutes: number;
  maxLifetimeHours: number;
}
const NO_BOUNDS: SandboxBounds = { idleTimeoutMinutes: 0, maxLifetimeHours: 0 };

/**
 * When the live sandbox will be reclaimed, as the lifecycle check decides it: at its maximum
 * lifetime from creation, or (while the conversation rests idle) after the idle timeout from
 * the last activity. Null when that bound is off or does not apply.
 */
function sandboxExpiry(row: ConversationRow, bounds: SandboxBounds) {
  // A terminated or failed conversation's sandbox is being destroyed, whatever its row says yet.
  const live =
    (row.sandbox_status === 'ready' ||
      row.sandbox_status === 'starting' ||
      row.sandbox_status === 'pending') &&
    row.status !== 'terminated' &&
    row.status !== 'failed';
  const created = row.sandbox_created_at ? new Date(row.sandbox_created_at) : null;
  const expiresAt =
    live && created && bounds.maxLifetimeHours > 0
      ? new Date(created.getTime() + bounds.maxLifetimeHours * 3_600_000).toISOString()
      : null;
  const idleExpiresAt =
    live && row.status === 'idle' && bounds.idleTimeoutMinutes > 0
      ? new Date(row.last_activity_at.getTime() + bounds.idleTimeoutMinutes * 60_000).toISOString()
      : null;
  return {
    created_at: created ? created.toISOString() : null,
    expires_at: expiresAt,
    idle_expires_at: idleExpiresAt,
  };
}

export function conversationView(row: ConversationRow, bounds: SandboxBounds = NO_BOUNDS): ConversationView {
  return {
    id: row.id,
    agent_id: row.agent_id,
    vault_id: row.vault_id,
    status: row.status,
    source: row.source,
    parent_conversation_id: row.parent_conversation_id,
    title: row.title,
    unread: row.unread,
    failure_reason: row.failure_reason,
    sandbox:
      row.sandbox_name && row.sandbox_status
        ? {
            name: row.sandbox_name,
            status: row.sandbox_status,
            reason: row.sandbox_reason ?? null,
            ...sandboxExpiry(row, bounds),
          }
        : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    last_activity_at: row.last_activity_at.toISOString(),
  };
}

export function turnView(row: TurnRow): TurnView {
  return {
    id: row.id,
    seq: row.seq,
    status: row.status,
    prompt: row.prompt,
    runtime_session_id: row.runtime_session_id,
    exit_code: row.exit_code,
    error: row.error,
    usage: (row.usage as Record<string, number> | null) ?? null,
    created_at: row.created_at.toISOString(),
    started_at: iso(row.started_at),
    ended_at: iso(row.ended_at),
  };
}

function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[0-9a-f-]{36}$/.test(id)) throw AppError.validation({ cursor: ['is not a valid cursor'] });
  return id;
}

const provisioning = () =>
  new AppError('conversation_provisioning', 'the conversation is provisioning its sandbox; retry shortly', {
    headers: { 'retry-after': String(PROVISIONING_RETRY_AFTER_SECONDS) },
  });
/**
 * The owner is blocked in provisioning while the conversation's live sandbox is not ready: the
 * first provisioning (the conversation `pending`) or a wake after the sandbox was reclaimed (the
 * conversation `running`, its turn queued).
 */
const blockedInProvisioning = (live: { status: string } | undefined): boolean =>
  live !== undefined && live.status !== 'ready';
const terminated = () => new AppError('conversation_terminated', 'the conversation is terminated');
const failed = () => new AppError('conversation_failed', 'the conversation failed; start a new one');

const storageExceeded = (used: number) =>
  new AppError(
    'conversation_storage_exceeded',
    `a conversation stores at most ${CONVERSATION_INPUT_MAX_BYTES / (1024 * 1024)} MiB of prompts and images; this one holds ${(used / (1024 * 1024)).toFixed(1)} MiB: start a new conversation`,
    { extra: { limit: CONVERSATION_INPUT_MAX_BYTES, used } },
  );

export function createConversationsService(deps: {
  db: Db;
  gates: Gates;
  sandboxKey: SandboxKeyRule;
  /** Where a sub-conversation's redaction values come from (lineage-secrets.ts). */
  lineage: LineageDeps;
  inferenceCredentials: Pick<InferenceCredentialsService, 'forSandbox'>;
  engine: EngineCommands;
  logger: Logger;
  /** Shown as the sandbox's `expires_at` / `idle_expires_at` (the console's "lifetime left"). */
  bounds?: SandboxBounds;
}): ConversationsService {
  const { db, gates, engine } = deps;
  const view = (row: ConversationRow) => conversationView(row, deps.bounds);

  const adoptSoon = (tenantId: string, conversationId: string) => {
    setImmediate(() => {
      engine
        .adoptOrphan(tenantId, conversationId)
        .catch((err: unknown) =>
          deps.logger.warn({ err, conversationId }, 'adopting the conversation failed'),
        );
    });
  };

  const kick = (command: Command) => {
    // The rows are committed: a failed kick leaves the work to the orphan sweep (lifecycle.ts).
    engine
      .send(command)
      .catch((err: unknown) =>
        deps.logger.error(
          { err, conversationId: command.conversationId },
          'conversation command not delivered',
        ),
      );
  };

  const mustFind = async (tenantId: string, id: string) => {
    const row = isUuid(id) ? await findConversation(db, tenantId, id) : undefined;
    if (!row) throw AppError.notFound('conversation');
    return row;
  };

  /**
   * The prompt and title a sandbox key writes, redacted with what its sandbox's redactor hides:
   * its lineage's secret values, the account's inference keys and the key itself.
   */
  const redactedForKey = async (caller: Caller, prompt: string) => {
    const p = caller.principal;
    if (!isSandboxKey(p)) return { prompt, title: titleOf(prompt) };
    const registry = createSecretRegistry();
    const [lineage, credentials] = await Promise.all([
      lineageSecretValues(deps.lineage, p.tenantId, p.conversationId, { self: true }),
      deps.inferenceCredentials.forSandbox(p.tenantId, db),
    ]);
    registry.registerAll([
      ...lineage,
      ...credentials.map((c) => c.apiKey),
      ...(caller.bearer ? [caller.bearer] : []),
    ]);
    const redacted = registry.size === 0 ? prompt : registry.redact(prompt).toString('utf8');
    return { prompt: redacted, title: titleOf(redacted) };
  };

  const isProvisioning = async (tenantId: string, id: string, status: string) =>
    status === 'pending' || blockedInProvisioning(await findLiveSandbox(db, tenantId, id));

  return {
    async create(caller, input) {
      const tenantId = caller.principal.tenantId;
      const agent = await gates.agent(tenantId, input.agent_id);
      const vaultId = input.vault_id ?? null;
      if (vaultId !== null) await gates.vault(tenantId, agent.id, vaultId);
      await deps.sandboxKey.admitChild(caller.principal, agent, vaultId);
      await gates.subscription(tenantId);
      const images = decodeImages(input.images);
      const { source, parent } = sourceOf(caller);
      const { prompt, title } = await redactedForKey(caller, input.prompt);
      const id = uuidv7();
      await db.transaction().execute(async (trx) => {
        await gates.admit(trx, tenantId, { newSandbox: true });
        await deps.sandboxKey.admitChildSandbox(trx, caller.principal);
        await insertStartedConversation(trx, {
          id,
          tenantId,
          agentId: agent.id,
          vaultId,
          source,
          parentConversationId: parent,
          title,
          sandboxName: sandboxName(tenantId),
          prompt,
          images,
          inputBytes: turnInputBytes({ prompt, images }),
        });
      });
      kick({ type: 'prompt', tenantId, conversationId: id });
      return view(await mustFind(tenantId, id));
    },

    async list(tenantId, query) {
      const afterId = query.cursor ? decodeCursor(query.cursor) : undefined;
      const rows = await listConversations(db, tenantId, query, query.limit, afterId);
      const page = rows.slice(0, query.limit);
      const hasMore = rows.length > query.limit;
      const last = page.at(-1);
      return {
        data: page.map(view),
        meta: {
          next_cursor: hasMore && last ? Buffer.from(last.id).toString('base64url') : null,
          has_more: hasMore,
        },
      };
    },

    async get(tenantId, id) {
      const row = await mustFind(tenantId, id);
      const pulls = await listPullRequests(db, tenantId, row.id);
      return {
        ...view(row),
        pull_requests: pulls.map((p) => ({
          repo: p.repo_dir,
          branch: p.branch,
          provider: p.provider,
          number: p.number,
          url: p.url,
          created_at: p.created_at.toISOString(),
        })),
      };
    },

    async turns(tenantId, id) {
      await mustFind(tenantId, id);
      return (await listTurns(db, tenantId, id)).map(turnView);
    },

    async prompt(tenantId, id, input) {
      // The common follow-up (idle, warm, nothing to refuse) in one statement. It is tried only
      // when the request passes what is checked before the conversation is read (its images, the
      // subscription gate); otherwise the long way below refuses in the spec's order (404 first).
      let decoded: TurnImage[] | null = null;
      try {
        decoded = decodeImages(input.images);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
      }
      // Passed here, the gate is not asked again below; refused, it is, after the 404 check.
      const subscribed = await gates.subscription(tenantId).then(
        () => true,
        () => false,
      );
      if (decoded && isUuid(id) && subscribed) {
        const turn = await queueWarmTurn(db, {
          tenantId,
          conversationId: id,
          prompt: input.prompt,
          images: decoded,
        });
        if (turn) {
          kick({ type: 'prompt', tenantId, conversationId: id });
          return turnView(turn);
        }
      }
      const turn = await db.transaction().execute(async (trx) => {
        // The lock is the existence check too (404 first, then the gates in their order).
        const conv = isUuid(id) ? await lockConversation(trx, tenantId, id) : undefined;
        if (!conv) throw AppError.notFound('conversation');
        if (!subscribed) await gates.subscription(tenantId);
        const images = decoded ?? decodeImages(input.images);
        if (conv.status === 'terminated') throw terminated();
        if (conv.status === 'failed') throw failed();
        if (conv.status === 'pending') throw provisioning();
        // Before busy, which a wake's waiting turn would always make it.
        const live = await findLiveSandbox(trx, tenantId, id);
        if (blockedInProvisioning(live)) throw provisioning();
        // Busy is a turn still queued or running. The owner marks the conversation idle just
        // after the turn's end is on the stream, so a client that saw it end may prompt at once:
        // `running` with every turn ended is that moment, and the prompt is taken (the owner
        // runs it next). Read after the lock: a turn queued by a prompt that held it is seen.
        if (conv.status === 'running' && (await findRunningTurn(trx, tenantId, id))) {
          // Busy all the same, but a turn whose owner died has nobody to end it: this process
          // takes it over now (nothing when its owner lives), not at the next orphan probe.
          adoptSoon(tenantId, id);
          throw new AppError('conversation_busy', 'a turn is running; wait for it to end');
        }
        if (conv.agent_id === null)
          throw AppError.validation({ agent_id: ['the agent of this conversation was deleted'] });
        const used = Number(conv.input_bytes);
        if (used + turnInputBytes({ prompt: input.prompt, images }) > CONVERSATION_INPUT_MAX_BYTES)
          throw storageExceeded(used);
        await gates.admit(trx, tenantId, {
          newSandbox: live === undefined,
          suspended: conv.suspended_at !== null,
        });
        if (!live) await insertSandbox(trx, { tenantId, conversationId: id, name: sandboxName(tenantId) });
        return await insertTurn(trx, {
          tenantId,
          conversationId: id,
          prompt: input.prompt,
          images,
        });
      });
      kick({ type: 'prompt', tenantId, conversationId: id });
      return turnView(turn);
    },

    async interrupt(tenantId, id) {
      const conv = await mustFind(tenantId, id);
      if (conv.status === 'terminated') throw terminated();
      if (conv.status === 'failed') throw failed();
      if (await isProvisioning(tenantId, id, conv.status)) throw provisioning();
      const turn = await findRunningTurn(db, tenantId, id);
      if (!turn) throw new AppError('no_turn_running', 'no turn is running');
      kick({ type: 'interrupt', tenantId, conversationId: id, turnId: turn.id });
      return turnView(turn);
    },

    async terminate(tenantId, id) {
      await mustFind(tenantId, id);
      await db.transaction().execute(async (trx) => {
        const conv = await lockConversation(trx, tenantId, id);
        if (!conv) throw AppError.notFound('conversation');
        if (conv.status === 'terminated') throw terminated();
        if (conv.status === 'failed') throw failed();
        if (await isProvisioning(tenantId, id, conv.status)) throw provisioning();
        await setConversationStatus(trx, tenantId, id, 'terminated');
      });
      kick({ type: 'terminate', tenantId, conversationId: id });
      return view(await mustFind(tenantId, id));
    },

    async remove(tenantId, id) {
      await mustFind(tenantId, id);
      const names = await deleteConversation(db, tenantId, id);
      if (!names) throw AppError.notFound('conversation');
      kick({ type: 'delete', tenantId, conversationId: id });
      // The owner (if any) stops and destroys too; destroying here as well covers a conversation
      // nobody owns. Destroy is idempotent (404 counts as success). The destroys were queued with
      // the delete: one the backend does not confirm is retried by the lifecycle clock.
      await engine.destroySandboxes(tenantId, names);
    },

    async prepareTenantRemoval(trx, tenantId) {
      const { names, conversationIds } = await queueTenantDestroys(trx, tenantId);
      return { conversationIds, sandboxNames: names };
    },

    async finishTenantRemoval(tenantId, removal) {
      for (const conversationId of removal.conversationIds)
        kick({ type: 'delete', tenantId, conversationId });
      await engine.destroySandboxes(tenantId, removal.sandboxNames);
    },
  };
}
