// Conversation, turn and log rows written straight into the tables, for the log writer and
// stream tests (the public conversation routes create them in the end-to-end tests).
import { v7 as uuidv7 } from 'uuid';
import type { ConversationStatus } from '../../src/conversations/conversations.tables.ts';
import type { Db } from '../../src/db/database.ts';

export interface ConversationRow {
  id: string;
  tenantId: string;
  epoch: string;
}

export async function insertConversation(
  db: Db,
  tenantId: string,
  options: { status?: ConversationStatus; parentId?: string; unread?: boolean; epoch?: number } = {},
): Promise<ConversationRow> {
  const id = uuidv7();
  await db
    .insertInto('conversations')
    .values({
      id,
      tenant_id: tenantId,
      status: options.status ?? 'running',
      source: options.parentId ? 'sandbox' : 'api',
      parent_conversation_id: options.parentId ?? null,
      title: 'test conversation',
      unread: options.unread ?? false,
      owner_epoch: options.epoch ?? 1,
    })
    .execute();
  return { id, tenantId, epoch: String(options.epoch ?? 1) };
}

export async function insertTurn(db: Db, conversation: ConversationRow, seq = 1): Promise<string> {
  const id = uuidv7();
  await db
    .insertInto('turns')
    .values({
      id,
      tenant_id: conversation.tenantId,
      conversation_id: conversation.id,
      seq,
      prompt: 'echo hi',
      status: 'running',
    })
    .execute();
  return id;
}

export interface StoredRow {
  id: string;
  stream: string;
  turn_id: string | null;
  data: Buffer | null;
  stage: string | null;
  state: string | null;
  message: string | null;
}

export async function logRows(db: Db, conversationId: string): Promise<StoredRow[]> {
  const rows = await db
    .selectFrom('log_events')
    .select(['id', 'stream', 'turn_id', 'data', 'stage', 'state', 'message'])
    .where('conversation_id', '=', conversationId)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ ...r, id: String(r.id) }));
}

/** The stored output of one stream, concatenated. */
export async function storedText(
  db: Db,
  conversationId: string,
  stream: 'stdout' | 'stderr',
): Promise<string> {
  const rows = await logRows(db, conversationId);
  return Buffer.concat(
    rows.filter((r) => r.stream === stream).map((r) => r.data ?? Buffer.alloc(0)),
  ).toString();
}
