// SQL for reading the conversation log (the writer, log-writer.ts, owns every append). Every
// method takes the tenant id first; a conversation of another tenant does not exist here.
import type pg from 'pg';
import type { Db } from '../../db/database.ts';
import type { ConversationStatus, LogStream } from '../conversations.tables.ts';

export interface ConversationRef {
  id: string;
  status: ConversationStatus;
  parent_conversation_id: string | null;
}

export async function findConversationRef(
  db: Db,
  tenantId: string,
  id: string,
): Promise<ConversationRef | undefined> {
  return await db
    .selectFrom('conversations')
    .select(['id', 'status', 'parent_conversation_id'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export interface LogEventRow {
  id: number | string;
  turn_id: string | null;
  stream: LogStream;
  data: Buffer | null;
  stage: string | null;
  state: string | null;
  duration_ms: number | null;
  message: string | null;
  created_at: Date;
}

/** Rows strictly after `after` (a log event id), in id order; `streams` null = all three. */
export async function listLogEvents(
  db: Db,
  tenantId: string,
  conversationId: string,
  options: { after: string; streams: readonly LogStream[] | null; limit: number },
): Promise<LogEventRow[]> {
  let query = db
    .selectFrom('log_events')
    .select(['id', 'turn_id', 'stream', 'data', 'stage', 'state', 'duration_ms', 'message', 'created_at'])
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .where('id', '>', options.after)
    .orderBy('id')
    .limit(options.limit);
  if (options.streams) query = query.where('stream', 'in', options.streams);
  return await query.execute();
}

/** Clears the unread flag (the owner read the log); no write when it is already clear. */
export async function clearUnread(db: Db, tenantId: string, id: string): Promise<void> {
  await db
    .updateTable('conversations')
    .set({ unread: false })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('unread', '=', true)
    .execute();
}

/**
 * Whether some session holds the conversation's ownership lock (owner.ts takes
 * `pg_try_advisory_lock(hashtextextended('paddock:conversation:' || id, 0))`): a bigint
 * advisory lock shows in pg_locks as classid = high 32 bits, objid = low 32 bits, objsubid 1.
 * A holder that is a registered owner node whose lease expired (owner.ts invariant 7: it is
 * hung, and about to be fenced) holds it for no one.
 */
export async function isConversationLocked(pool: pg.Pool, conversationId: string): Promise<boolean> {
  const res = await pool.query<{ owned: boolean }>(
    `WITH k AS (SELECT hashtextextended('paddock:conversation:' || $1::text, 0) AS key)
     SELECT EXISTS (
       SELECT 1 FROM pg_locks, k
       WHERE locktype = 'advisory' AND granted AND objsubid = 1
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND classid = ((k.key >> 32) & 4294967295)::oid
         AND objid = (k.key & 4294967295)::oid
         AND NOT EXISTS (
           SELECT 1 FROM owner_nodes n
           WHERE n.backend_pid = pg_locks.pid AND n.lease_until < now()
             AND n.backend_start = (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_locks.pid)
         )
     ) AS owned`,
    [conversationId],
  );
  return res.rows[0]?.owned === true;
}
