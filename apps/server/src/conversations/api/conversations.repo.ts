// SQL for conversations, their sandboxes and turns as the API reads and admits them. Every
// method takes the tenant id first. Writes of a conversation's owner (fenced by its lease
// epoch) live in owner-writes.repo.ts.
import { type Kysely, type RawBuilder, sql, type Transaction } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../../db/database.ts';
import type { Database as DatabaseSchema } from '../../db/schema.ts';
import type { TurnImage } from '../contracts.ts';
import type {
  ConversationSource,
  ConversationStatus,
  SandboxStatus,
  TurnStatus,
} from '../conversations.tables.ts';
import { LIVE_SANDBOX_STATUSES } from '../conversations.tables.ts';
import { CONVERSATION_INPUT_MAX_BYTES } from './conversations.schemas.ts';
import { treeOf } from './sandbox-key.ts';

type Conn = Kysely<DatabaseSchema> | Transaction<DatabaseSchema>;

const CONVERSATION_COLUMNS = [
  'c.id',
  'c.tenant_id',
  'c.agent_id',
  'c.vault_id',
  'c.status',
  'c.source',
  'c.parent_conversation_id',
  'c.title',
  'c.unread',
  'c.failure_reason',
  'c.runtime_session_id',
  'c.created_at',
  'c.updated_at',
  'c.last_activity_at',
] as const;

function withLatestSandbox(db: Conn) {
  return db
    .selectFrom('conversations as c')
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom('sandboxes')
          .select(['sandboxes.name', 'sandboxes.status', 'sandboxes.reason', 'sandboxes.created_at'])
          .whereRef('sandboxes.conversation_id', '=', 'c.id')
          .orderBy('sandboxes.created_at', 'desc')
          .orderBy('sandboxes.id', 'desc')
          .limit(1)
          .as('s'),
      (join) => join.onTrue(),
    )
    .select(CONVERSATION_COLUMNS)
    .select([
      's.name as sandbox_name',
      's.status as sandbox_status',
      's.reason as sandbox_reason',
      's.created_at as sandbox_created_at',
    ]);
}

export type ConversationRow = NonNullable<Awaited<ReturnType<typeof findConversation>>>;

export async function findConversation(db: Conn, tenantId: string, id: string) {
  return await withLatestSandbox(db)
    .where('c.tenant_id', '=', tenantId)
    .where('c.id', '=', id)
    .executeTakeFirst();
}

export interface ConversationFilters {
  status?: ConversationStatus;
  agentId?: string;
  /** Only the conversations this one started. */
  parentId?: string;
  /** Only this conversation and its descendants (a sandbox key's list, sandbox-key.ts). */
  tree?: string;
}

/** Newest first (ids are UUIDv7, so id order is creation order); `afterId` is the last id of the previous page. */
export async function listConversations(
  db: Db,
  tenantId: string,
  filters: ConversationFilters,
  limit: number,
  afterId: string | undefined,
) {
  let q = withLatestSandbox(db).where('c.tenant_id', '=', tenantId);
  if (filters.status) q = q.where('c.status', '=', filters.status);
  if (filters.agentId) q = q.where('c.agent_id', '=', filters.agentId);
  if (filters.parentId) q = q.where('c.parent_conversation_id', '=', filters.parentId);
  if (filters.tree) q = q.where('c.id', 'in', treeOf(tenantId, filters.tree));
  if (afterId) q = q.where('c.id', '<', afterId);
  return await q
    .orderBy('c.id', 'desc')
    .limit(limit + 1)
    .execute();
}

/**
 * Takes the per-user admission lock (the user row, FOR UPDATE) and reports what the gates
 * need: whether the account is suspended and how many live sandboxes it has. Held until the
 * transaction ends, so two admissions of one user are serialized: the quota check and the
 * insert are atomic per user (test: "admits exactly 5 of 20 parallel starts").
 */
export async function lockForAdmission(trx: Transaction<DatabaseSchema>, tenantId: string) {
  const user = await trx
    .selectFrom('users')
    .select(['suspended_at'])
    .where('id', '=', tenantId)
    .forUpdate()
    .executeTakeFirst();
  // A statement of its own: one that starts after the lock was granted sees every sandbox an
  // admission committed before it (in the locking statement, the snapshot before the wait).
  const live = await trx
    .selectFrom('sandboxes')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('tenant_id', '=', tenantId)
    .where('status', 'in', LIVE_SANDBOX_STATUSES)
    .executeTakeFirstOrThrow();
  return { exists: user !== undefined, suspended: user?.suspended_at != null, liveSandboxes: Number(live.n) };
}

/**
 * A new conversation with its `pending` sandbox row and its first turn (seq 1, queued), in one
 * statement (data-modifying CTEs: the foreign keys are checked at its end), then the turn's
 * images: two round trips fewer on the way from POST /api/conversations to the backend's create.
 */
export async function insertStartedConversation(
  trx: Conn,
  row: {
    id: string;
    tenantId: string;
    agentId: string;
    vaultId: string | null;
    source: ConversationSource;
    parentConversationId: string | null;
    title: string;
    sandboxName: string;
    prompt: string;
    images: TurnImage[];
    /** The prompt's and images' bytes, the input bound's first count. */
    inputBytes: number;
  },
): Promise<void> {
  const turnId = uuidv7();
  await trx
    .with('c', (db) =>
      db.insertInto('conversations').values({
        id: row.id,
        tenant_id: row.tenantId,
        agent_id: row.agentId,
        vault_id: row.vaultId,
        status: 'pending',
        source: row.source,
        parent_conversation_id: row.parentConversationId,
        title: row.title,
        input_bytes: row.inputBytes,
      }),
    )
    .with('s', (db) =>
      db.insertInto('sandboxes').values({
        id: uuidv7(),
        tenant_id: row.tenantId,
        conversation_id: row.id,
        name: row.sandboxName,
        status: 'pending',
      }),
    )
    .insertInto('turns')
    .values({
      id: turnId,
      tenant_id: row.tenantId,
      conversation_id: row.id,
      seq: 1,
      prompt: row.prompt,
      status: 'queued',
    })
    .execute();
  await insertImages(trx, row.tenantId, turnId, row.images);
}

async function insertImages(trx: Conn, tenantId: string, turnId: string, images: TurnImage[]): Promise<void> {
  if (images.length === 0) return;
  await trx
    .insertInto('turn_images')
    .values(
      images.map((image) => ({
        id: uuidv7(),
        tenant_id: tenantId,
        turn_id: turnId,
        media_type: image.mediaType,
        data: image.data,
      })),
    )
    .execute();
}

export async function insertSandbox(
  trx: Conn,
  row: { tenantId: string; conversationId: string; name: string },
): Promise<string> {
  const id = uuidv7();
  await trx
    .insertInto('sandboxes')
    .values({
      id,
      tenant_id: row.tenantId,
      conversation_id: row.conversationId,
      name: row.name,
      status: 'pending',
    })
    .execute();
  return id;
}

/** The bytes a turn's prompt and images (decoded) take in the conversation's input bound. */
export function turnInputBytes(row: Pick<NewTurn, 'prompt' | 'images'>): number {
  return row.images.reduce((sum, image) => sum + image.data.length, Buffer.byteLength(row.prompt, 'utf8'));
}

/** A follow-up prompt's turn, as the request admitted it. */
export interface NewTurn {
  tenantId: string;
  conversationId: string;
  prompt: string;
  images: TurnImage[];
}

/**
 * A follow-up's turn: queued with the next sequence number, and in the same statement the
 * conversation becomes `running`, its activity clock restarts and its input bytes grow by the
 * prompt's and images'; then its images. Only when
 * `condition` (on the conversation row) holds: the turn is inserted from the conversation row the
 * update returned, so both happen or nothing is written.
 */
async function queueTurn(conn: Conn, row: NewTurn, condition: RawBuilder<boolean>) {
  const turn = await conn
    .with('running', (db) =>
      db
        .updateTable('conversations')
        .set({
          status: 'running',
          updated_at: sql<Date>`now()`,
          last_activity_at: sql<Date>`now()`,
          input_bytes: sql<string>`input_bytes + ${turnInputBytes(row)}`,
        })
        .where('tenant_id', '=', row.tenantId)
        .where('id', '=', row.conversationId)
        .where(condition)
        .returning('id'),
    )
    .insertInto('turns')
    .columns(['id', 'tenant_id', 'conversation_id', 'seq', 'prompt', 'status'])
    .expression((eb) =>
      eb
        .selectFrom('running')
        .select([
          sql<string>`${uuidv7()}::uuid`.as('id'),
          sql<string>`${row.tenantId}::uuid`.as('tenant_id'),
          'running.id as conversation_id',
          sql<number>`(SELECT COALESCE(max(seq), 0) + 1 FROM turns WHERE conversation_id = ${row.conversationId})`.as(
            'seq',
          ),
          sql<string>`${row.prompt}`.as('prompt'),
          sql<string>`'queued'`.as('status'),
        ]),
    )
    .returningAll()
    .executeTakeFirst();
  if (turn) await insertImages(conn, row.tenantId, turn.id, row.images);
  return turn;
}

export type TurnRow = NonNullable<Awaited<ReturnType<typeof queueTurn>>>;

/** A follow-up prompt's admitted turn (queueTurn), in the caller's transaction after its checks. */
export async function insertTurn(trx: Conn, row: NewTurn): Promise<TurnRow> {
  const turn = await queueTurn(trx, row, sql<boolean>`true`);
  if (!turn) throw new Error('the turn was not inserted');
  return turn;
}

/**
 * The common follow-up in one statement, before any transaction: the conversation `idle`, its
 * agent present, its input bound not reached by this turn, its user not suspended and its live
 * sandbox `ready` (warm), so every check of the
 * long way would pass and no sandbox is admitted. undefined, with nothing written, otherwise (the
 * caller takes the long way, which answers what the fast way could not). The update's row lock
 * serializes it with every other write of the conversation: a concurrent prompt that took the
 * conversation first made it `running`, which the update re-checks after the lock (READ
 * COMMITTED), so exactly one of them is taken. With images (another statement) it is one
 * transaction.
 */
export async function queueWarmTurn(db: Db, row: NewTurn): Promise<TurnRow | undefined> {
  const warm = sql<boolean>`conversations.status = 'idle' AND conversations.agent_id IS NOT NULL
    AND conversations.input_bytes + ${turnInputBytes(row)} <= ${CONVERSATION_INPUT_MAX_BYTES}
    AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = ${row.tenantId} AND u.suspended_at IS NOT NULL)
    AND EXISTS (SELECT 1 FROM sandboxes s WHERE s.tenant_id = ${row.tenantId} AND s.conversation_id = ${row.conversationId} AND s.status = 'ready')`;
  if (row.images.length === 0) return await queueTurn(db, row, warm);
  return await db.transaction().execute((trx) => queueTurn(trx, row, warm));
}

/**
 * Locks the conversation row for a state change decided by the caller (FOR UPDATE) and reads, in the same statement, whether its user is
 * suspended (the user row is not locked: lockForAdmission does that when a sandbox is admitted).
 */
export async function lockConversation(trx: Transaction<DatabaseSchema>, tenantId: string, id: string) {
  return await trx
    .selectFrom('conversations')
    .leftJoin('users', 'users.id', 'conversations.tenant_id')
    .select([
      'conversations.id',
      'conversations.status',
      'conversations.agent_id',
      'conversations.vault_id',
      'conversations.input_bytes',
      'users.suspended_at',
    ])
    .where('conversations.tenant_id', '=', tenantId)
    .where('conversations.id', '=', id)
    .forUpdate('conversations')
    .executeTakeFirst();
}

export async function setConversationStatus(
  db: Conn,
  tenantId: string,
  id: string,
  status: ConversationStatus,
  options: { touchActivity?: boolean } = {},
): Promise<void> {
  await db
    .updateTable('conversations')
    .set({
      status,
      updated_at: sql<Date>`now()`,
      ...(options.touchActivity ? { last_activity_at: sql<Date>`now()` } : {}),
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .execute();
}

export async function findLiveSandbox(db: Conn, tenantId: string, conversationId: string) {
  return await db
    .selectFrom('sandboxes')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .where('status', 'in', LIVE_SANDBOX_STATUSES)
    .executeTakeFirst();
}

export type SandboxRow = NonNullable<Awaited<ReturnType<typeof findLiveSandbox>>>;

export async function setSandboxStatus(
  db: Conn,
  tenantId: string,
  sandboxId: string,
  status: SandboxStatus,
  reason: string | null = null,
): Promise<void> {
  const ended = status === 'terminated' || status === 'failed';
  await db
    .updateTable('sandboxes')
    .set({
      status,
      reason,
      updated_at: sql<Date>`now()`,
      ...(ended ? { ended_at: sql<Date>`now()` } : {}),
      ...(status === 'ready' ? { ready_at: sql<Date>`now()` } : {}),
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', sandboxId)
    .execute();
}

export async function findRunningTurn(db: Conn, tenantId: string, conversationId: string) {
  return await db
    .selectFrom('turns')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .where('status', 'in', ['queued', 'running'] satisfies TurnStatus[])
    .orderBy('seq')
    .executeTakeFirst();
}

export async function listTurns(db: Db, tenantId: string, conversationId: string) {
  return await db
    .selectFrom('turns')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .orderBy('seq')
    .execute();
}

/**
 * Deletes the conversation (its sandboxes, turns and log go with it) and, in the same statement,
 * queues the destroy of its live sandboxes (destroy-queue.ts), due a minute later: the caller
 * destroys them at once, and if the process dies first the lifecycle clock still does. Null when
 * there was no such conversation; else the names to destroy.
 */
export async function deleteConversation(db: Db, tenantId: string, id: string): Promise<string[] | null> {
  const { rows } = await sql<{ deleted: boolean; names: string[] }>`
    WITH live AS (
      SELECT name FROM sandboxes
       WHERE tenant_id = ${tenantId} AND conversation_id = ${id}
         AND status IN (${sql.join(LIVE_SANDBOX_STATUSES)})
    ), owed AS (
      INSERT INTO sandbox_destroys (name, tenant_id, next_at)
      SELECT name, ${tenantId}, now() + interval '1 minute' FROM live
      ON CONFLICT (name) DO NOTHING
    ), gone AS (
      DELETE FROM conversations WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING id
    )
    SELECT EXISTS (SELECT 1 FROM gone) AS deleted, ARRAY(SELECT name FROM live) AS names`.execute(db);
  const row = rows[0];
  return row?.deleted ? row.names : null;
}

/**
 * Account deletion (accounts/account-deletion.ts), inside its transaction with the account's
 * users row locked, so no sandbox row of the tenant can appear until it commits: queues the
 * destroy of every live sandbox of the tenant in one statement, as deleteConversation does for
 * one conversation, and returns their names and the tenant's conversations (whose owners are
 * told once the rows are gone).
 */
export async function queueTenantDestroys(
  db: Db,
  tenantId: string,
): Promise<{ names: string[]; conversationIds: string[] }> {
  const { rows } = await sql<{ names: string[]; conversation_ids: string[] }>`
    WITH live AS (
      SELECT name FROM sandboxes
       WHERE tenant_id = ${tenantId} AND status IN (${sql.join(LIVE_SANDBOX_STATUSES)})
    ), owed AS (
      INSERT INTO sandbox_destroys (name, tenant_id, next_at)
      SELECT name, ${tenantId}, now() + interval '1 minute' FROM live
      ON CONFLICT (name) DO NOTHING
    )
    SELECT ARRAY(SELECT name FROM live) AS names,
           ARRAY(SELECT id FROM conversations WHERE tenant_id = ${tenantId}) AS conversation_ids`.execute(db);
  const row = rows[0];
  return { names: row?.names ?? [], conversationIds: row?.conversation_ids ?? [] };
}

export async function markRead(db: Db, tenantId: string, id: string): Promise<void> {
  await db
    .updateTable('conversations')
    .set({ unread: false })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('unread', '=', true)
    .execute();
}

/** The pull requests opened from a conversation (conversations/work/push.service.ts), oldest first. */
export async function listPullRequests(db: Conn, tenantId: string, conversationId: string) {
  return await db
    .selectFrom('conversation_pull_requests')
    .select(['repo_dir', 'branch', 'provider', 'number', 'url', 'created_at'])
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .orderBy('created_at', 'asc')
    .orderBy('repo_dir')
    .orderBy('branch')
    .execute();
}
