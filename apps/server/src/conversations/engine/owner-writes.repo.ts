// The writes of a conversation's owner, each fenced by the lease epoch it took (owner.ts,
// invariant 2): a write whose epoch is no longer the conversation's changes nothing and throws
// StaleOwnerError, so a paused old owner cannot overwrite what a new owner decided
// (test: "a stale owner's writes are refused", conversations.ownership.test.ts).
// The owner's reads of the turn it works on (stored byte counts, images) sit here too.
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import { type OwnerLease, StaleOwnerError } from '../contracts.ts';
import type { ConversationStatus, SandboxStatus, TurnStatus, TurnUsage } from '../conversations.tables.ts';

/** A turn still to work on (or to re-join). */
const NEXT_TURN_STATUSES = ['queued', 'running'] satisfies TurnStatus[];
/** A sandbox row that may still have a backend sandbox. */
const LIVE_STATUSES = ['pending', 'starting', 'ready'] satisfies SandboxStatus[];

function fenced(lease: OwnerLease) {
  return sql<boolean>`EXISTS (SELECT 1 FROM conversations f WHERE f.id = ${lease.conversationId} AND f.owner_epoch = ${lease.epoch})`;
}

function check(lease: OwnerLease, updated: bigint | number): void {
  if (Number(updated) === 0) throw new StaleOwnerError(lease.conversationId);
}

/**
 * For a write with a condition of its own besides the fence: true when it changed a row; false
 * when the condition did not hold; StaleOwnerError when the lease is gone.
 */
async function changedUnlessStale(db: Db, lease: OwnerLease, updated: bigint | number): Promise<boolean> {
  if (Number(updated) > 0) return true;
  await ownerLoadConversation(db, lease);
  return false;
}

export async function ownerLoadConversation(db: Db, lease: OwnerLease) {
  const row = await db
    .selectFrom('conversations')
    .select(['id', 'status', 'agent_id', 'vault_id', 'runtime_session_id', 'owner_epoch', 'last_activity_at'])
    .where('tenant_id', '=', lease.tenantId)
    .where('id', '=', lease.conversationId)
    .executeTakeFirst();
  if (!row || String(row.owner_epoch) !== lease.epoch) throw new StaleOwnerError(lease.conversationId);
  return row;
}

export async function ownerSetConversation(
  db: Db,
  lease: OwnerLease,
  set: {
    status?: ConversationStatus;
    failureReason?: string | null;
    unread?: boolean;
    runtimeSessionId?: string;
    touchActivity?: boolean;
  },
  options: { onlyIf?: ConversationStatus[] } = {},
): Promise<boolean> {
  const q = db
    .updateTable('conversations')
    .set({
      updated_at: sql<Date>`now()`,
      ...(set.status ? { status: set.status } : {}),
      ...(set.failureReason !== undefined ? { failure_reason: set.failureReason } : {}),
      ...(set.unread !== undefined ? { unread: set.unread } : {}),
      ...(set.runtimeSessionId !== undefined ? { runtime_session_id: set.runtimeSessionId } : {}),
      ...(set.touchActivity ? { last_activity_at: sql<Date>`now()` } : {}),
    })
    .where('tenant_id', '=', lease.tenantId)
    .where('id', '=', lease.conversationId)
    .where('owner_epoch', '=', lease.epoch);
  if (options.onlyIf) {
    // A status decided by a request (terminated) is never overwritten by the owner.
    const res = await q.where('status', 'in', options.onlyIf).executeTakeFirst();
    return await changedUnlessStale(db, lease, res.numUpdatedRows);
  }
  check(lease, (await q.executeTakeFirst()).numUpdatedRows);
  return true;
}

export async function ownerSetSandbox(
  db: Db,
  lease: OwnerLease,
  sandboxId: string,
  status: SandboxStatus,
  reason: string | null = null,
): Promise<void> {
  const ended = status === 'terminated' || status === 'failed';
  const res = await db
    .updateTable('sandboxes')
    .set({
      status,
      reason,
      updated_at: sql<Date>`now()`,
      ...(ended ? { ended_at: sql<Date>`now()` } : {}),
      ...(status === 'ready' ? { ready_at: sql<Date>`now()` } : {}),
    })
    .where('tenant_id', '=', lease.tenantId)
    .where('id', '=', sandboxId)
    .where(fenced(lease))
    .executeTakeFirst();
  check(lease, res.numUpdatedRows);
}

/** A replacement sandbox row (the previous one vanished under a live conversation). */
export async function ownerInsertSandbox(db: Db, lease: OwnerLease, id: string, name: string): Promise<void> {
  const res = await db
    .insertInto('sandboxes')
    .columns(['id', 'tenant_id', 'conversation_id', 'name', 'status'])
    .expression(
      db
        .selectNoFrom([
          sql<string>`${id}::uuid`.as('id'),
          sql<string>`${lease.tenantId}::uuid`.as('tenant_id'),
          sql<string>`${lease.conversationId}::uuid`.as('conversation_id'),
          sql<string>`${name}`.as('name'),
          sql<SandboxStatus>`'pending'`.as('status'),
        ])
        .where(fenced(lease)),
    )
    .executeTakeFirst();
  check(lease, res.numInsertedOrUpdatedRows ?? 0n);
}

export async function ownerLiveSandbox(db: Db, lease: OwnerLease) {
  return await db
    .selectFrom('sandboxes')
    .selectAll()
    .where('tenant_id', '=', lease.tenantId)
    .where('conversation_id', '=', lease.conversationId)
    .where('status', 'in', LIVE_STATUSES)
    .executeTakeFirst();
}

/**
 * Whether a turn ended after the runtime's session state was last saved (or none ever was): the
 * rows decide, whichever owner ran the turn (conversation-server.ts invariant 6); with the
 * conversation's agent, whose runtime names the paths to save.
 */
export async function ownerSessionBehind(
  db: Db,
  lease: OwnerLease,
): Promise<{ behind: boolean; agentId: string | null }> {
  const row = await db
    .selectFrom('conversations as c')
    .select([
      'c.agent_id',
      sql<boolean>`EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND t.ended_at IS NOT NULL AND (c.session_state_at IS NULL OR t.ended_at > c.session_state_at))`.as(
        'behind',
      ),
    ])
    .where('c.tenant_id', '=', lease.tenantId)
    .where('c.id', '=', lease.conversationId)
    .executeTakeFirst();
  return { behind: row?.behind === true, agentId: row?.agent_id ?? null };
}

/**
 * One round of the conversation server's loop in one statement: the conversation (StaleOwnerError
 * unless it is still this lease's), the turn to work on (a running one first, to reattach, else
 * the oldest queued) and the live sandbox, with the columns the loop uses: one round trip instead
 * of three on the way from a prompt to its turn's first byte. Also the account's credentials mark
 * (credentialsMark below), for a warm sandbox whose env predates a change of them.
 */
export async function ownerRound(db: Db, lease: OwnerLease) {
  const row = await db
    .selectFrom('conversations as c')
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom('turns')
          .select(['id', 'status', 'prompt', 'seq', 'exec_session_id', 'started_at'])
          .whereRef('turns.conversation_id', '=', 'c.id')
          .where('turns.tenant_id', '=', lease.tenantId)
          .where('turns.status', 'in', NEXT_TURN_STATUSES)
          .orderBy(sql`status = 'running'`, 'desc')
          .orderBy('seq')
          .limit(1)
          .as('t'),
      (join) => join.onTrue(),
    )
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom('sandboxes')
          .select(['id', 'name', 'status'])
          .whereRef('sandboxes.conversation_id', '=', 'c.id')
          .where('sandboxes.tenant_id', '=', lease.tenantId)
          .where('sandboxes.status', 'in', LIVE_STATUSES)
          .limit(1)
          .as('s'),
      (join) => join.onTrue(),
    )
    .select([
      'c.id',
      'c.status',
      'c.agent_id',
      'c.vault_id',
      'c.runtime_session_id',
      'c.owner_epoch',
      'c.last_activity_at',
      't.id as turn_id',
      't.status as turn_status',
      't.prompt as turn_prompt',
      't.seq as turn_seq',
      't.exec_session_id as turn_exec_session_id',
      't.started_at as turn_started_at',
      's.id as sandbox_id',
      's.name as sandbox_name',
      's.status as sandbox_status',
      credentialsMark(lease.tenantId).as('credentials_mark'),
    ])
    .where('c.tenant_id', '=', lease.tenantId)
    .where('c.id', '=', lease.conversationId)
    .executeTakeFirst();
  if (!row || String(row.owner_epoch) !== lease.epoch) throw new StaleOwnerError(lease.conversationId);
  const conv = {
    id: row.id,
    status: row.status,
    agent_id: row.agent_id,
    vault_id: row.vault_id,
    runtime_session_id: row.runtime_session_id,
    owner_epoch: row.owner_epoch,
    last_activity_at: row.last_activity_at,
  };
  const turn =
    row.turn_id !== null && row.turn_status !== null && row.turn_prompt !== null && row.turn_seq !== null
      ? {
          id: row.turn_id,
          status: row.turn_status,
          prompt: row.turn_prompt,
          seq: row.turn_seq,
          exec_session_id: row.turn_exec_session_id,
          started_at: row.turn_started_at,
        }
      : undefined;
  const live =
    row.sandbox_id !== null && row.sandbox_name !== null && row.sandbox_status !== null
      ? { id: row.sandbox_id, name: row.sandbox_name, status: row.sandbox_status }
      : undefined;
  return { conv, turn, live, credentialsMark: row.credentials_mark };
}

/**
 * A mark of the account's inference credentials that changes with every set and delete of one:
 * each provider with the time its credential was last set (no value leaves the table). A set
 * gives its provider a new time, a delete removes the provider.
 */
function credentialsMark(tenantId: string) {
  return sql<string>`(SELECT coalesce(string_agg(ic.provider || '@' || ic.updated_at::text, ',' ORDER BY ic.provider), '') FROM inference_credentials ic WHERE ic.tenant_id = ${tenantId})`;
}

/**
 * Starts a queued turn: true when it was still `queued`; false when a request ended it meanwhile
 * (a terminate fails the open turns `interrupted`), which is never overwritten; StaleOwnerError
 * when the lease is gone.
 */
export async function ownerStartTurn(
  db: Db,
  lease: OwnerLease,
  turnId: string,
  sandboxId: string,
): Promise<boolean> {
  const res = await db
    .updateTable('turns')
    .set({ status: 'running', started_at: sql<Date>`now()`, sandbox_id: sandboxId })
    .where('tenant_id', '=', lease.tenantId)
    .where('id', '=', turnId)
    .where('status', '=', 'queued')
    .where(fenced(lease))
    .executeTakeFirst();
  return await changedUnlessStale(db, lease, res.numUpdatedRows);
}

export async function ownerSetExecSession(
  db: Db,
  lease: OwnerLease,
  turnId: string,
  sessionId: string,
): Promise<void> {
  const res = await db
    .updateTable('turns')
    .set({ exec_session_id: sessionId })
    .where('tenant_id', '=', lease.tenantId)
    .where('id', '=', turnId)
    .where(fenced(lease))
    .executeTakeFirst();
  check(lease, res.numUpdatedRows);
}

export async function ownerEndTurn(
  db: Db,
  lease: OwnerLease,
  turnId: string,
  end: {
    status: TurnStatus;
    exitCode: number | null;
    error: string | null;
    runtimeSessionId?: string | null;
    usage?: TurnUsage | null;
  },
): Promise<void> {
  const res = await db
    .updateTable('turns')
    .set({
      status: end.status,
      exit_code: end.exitCode,
      error: end.error,
      ended_at: sql<Date>`now()`,
      ...(end.runtimeSessionId ? { runtime_session_id: end.runtimeSessionId } : {}),
      ...(end.usage ? { usage: JSON.stringify(end.usage) } : {}),
    })
    .where('tenant_id', '=', lease.tenantId)
    .where('id', '=', turnId)
    .where('status', 'in', ['queued', 'running'])
    .where(fenced(lease))
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) await ownerLoadConversation(db, lease);
}

/** Fails every queued or running turn (terminate, provisioning failure). */
export async function ownerFailOpenTurns(
  db: Db,
  lease: OwnerLease,
  status: TurnStatus,
  error: string,
): Promise<void> {
  await db
    .updateTable('turns')
    .set({ status, error, ended_at: sql<Date>`now()` })
    .where('tenant_id', '=', lease.tenantId)
    .where('conversation_id', '=', lease.conversationId)
    .where('status', 'in', ['queued', 'running'])
    .where(fenced(lease))
    .execute();
}

/** What the log holds of a turn: raw bytes per stream (reattach.ts) and its events (turn.ts invariant 5). */
export async function turnStoredCounts(db: Db, lease: OwnerLease, turnId: string) {
  const row = await db
    .selectFrom('turns')
    .select((eb) => [
      'stdout_raw_bytes',
      'stderr_raw_bytes',
      eb
        .selectFrom('log_events')
        .select((c) => c.fn.countAll<string>().as('n'))
        .where('log_events.conversation_id', '=', lease.conversationId)
        .whereRef('log_events.turn_id', '=', 'turns.id')
        .where('log_events.stream', '=', 'events')
        .as('events'),
    ])
    .where('tenant_id', '=', lease.tenantId)
    .where('id', '=', turnId)
    .executeTakeFirstOrThrow();
  return {
    stdout: Number(row.stdout_raw_bytes),
    stderr: Number(row.stderr_raw_bytes),
    events: Number(row.events ?? 0),
  };
}

/** The images of a turn, in the order they were sent, for the turn's command. */
export async function turnImages(db: Db, tenantId: string, turnId: string) {
  return await db
    .selectFrom('turn_images')
    .select(['media_type', 'data'])
    .where('tenant_id', '=', tenantId)
    .where('turn_id', '=', turnId)
    .orderBy('id')
    .execute();
}
