// The JSON document of an account export, produced as text pieces in order, so that the
// writer streams it (account-exports.worker.ts) and at most one page of rows is in memory,
// whatever the account holds. What must hold (test/account-exports.http.test.ts):
// - Everything the account owns is in it: its resources as manifests `paddock apply` takes
//   again (apply/export.service.ts), its conversations with their turns, prompt images and
//   log events, and its audit events.
// - No secret value is in it: manifests carry placeholders, log rows and failure reasons are
//   stored redacted (log-writer.ts); sealed session state and credentials are left out.
// - Reads are keyset pages on indexed columns, every one scoped by tenant_id.
import type { ManifestDocument } from '../apply/export.service.ts';
import type { Db } from '../db/database.ts';

export const EXPORT_FORMAT = 'paddock.account-export';
export const EXPORT_FORMAT_VERSION = 1;

const CONVERSATIONS_PAGE = 100;
const TURNS_PAGE = 200;
/** A log row holds at most 32 KiB (log-writer.ts maxRowBytes): a page stays a few MiB. */
const LOG_EVENTS_PAGE = 100;
/** A prompt image is up to 5 MiB (IMAGE_MAX_BYTES): one at a time. */
const IMAGES_PAGE = 1;
const AUDIT_PAGE = 500;

const json = (v: unknown): string => JSON.stringify(v);
const iso = (d: Date | null): string | null => (d ? new Date(d).toISOString() : null);
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Output bytes as text when they are UTF-8 (they almost always are), else as base64. */
function logData(data: Buffer | null): { data: string | null } | { data_base64: string } {
  if (data === null) return { data: null };
  try {
    return { data: utf8.decode(data) };
  } catch {
    return { data_base64: data.toString('base64') };
  }
}

/** Keyset pages: `fetch(after)` returns up to `size` rows after the cursor, in cursor order. */
async function* pages<T, K>(
  size: number,
  fetch: (after: K | null, size: number) => Promise<T[]>,
  cursor: (row: T) => K,
): AsyncGenerator<T[]> {
  let after: K | null = null;
  for (;;) {
    const page = await fetch(after, size);
    if (page.length > 0) yield page;
    const last = page[page.length - 1];
    if (page.length < size || last === undefined) return;
    after = cursor(last);
  }
}

/** `"key":[...]`, one text piece per page. */
async function* pagedArray<T>(
  key: string,
  rows: AsyncIterable<T[]>,
  render: (row: T) => unknown,
): AsyncGenerator<string> {
  yield `${json(key)}:[`;
  let first = true;
  for await (const page of rows) {
    yield (first ? '' : ',') + page.map((r) => json(render(r))).join(',');
    first = false;
  }
  yield ']';
}

export async function* exportDocument(deps: {
  db: Db;
  /** The account's resources as apply/export.service.ts gives them (bounded per account). */
  manifests: readonly ManifestDocument[];
  tenantId: string;
  now: Date;
}): AsyncGenerator<string> {
  const { db, tenantId } = deps;
  const account = await db
    .selectFrom('users')
    .select(['id', 'email', 'created_at'])
    .where('id', '=', tenantId)
    .executeTakeFirstOrThrow();
  yield `{${json('format')}:${json(EXPORT_FORMAT)},${json('version')}:${EXPORT_FORMAT_VERSION},`;
  yield `${json('exported_at')}:${json(deps.now.toISOString())},`;
  yield `${json('account')}:${json({ id: account.id, email: account.email, created_at: iso(account.created_at) })},`;
  yield `${json('manifests')}:${json(deps.manifests)},`;
  yield* conversations(db, tenantId);
  yield ',';
  yield* pagedArray('audit_events', auditPages(db, tenantId), (e) => ({
    id: e.id,
    type: e.type,
    actor: { kind: e.actor_kind, user_id: e.actor_user_id, api_key_id: e.actor_api_key_id },
    ip: e.ip,
    metadata: e.metadata,
    created_at: iso(e.created_at),
  }));
  yield '}\n';
}

/** `"conversations":[...]`: each conversation's fields, then its turns, images and log as pages. */
async function* conversations(db: Db, tenantId: string): AsyncGenerator<string> {
  yield `${json('conversations')}:[`;
  let first = true;
  const list = pages(
    CONVERSATIONS_PAGE,
    async (after: string | null, size) => {
      let q = db
        .selectFrom('conversations')
        .select([
          'id',
          'agent_id',
          'vault_id',
          'parent_conversation_id',
          'status',
          'source',
          'title',
          'failure_reason',
          'log_truncated',
          'created_at',
          'updated_at',
          'last_activity_at',
        ])
        .where('tenant_id', '=', tenantId)
        .orderBy('tenant_id')
        .orderBy('id')
        .limit(size);
      if (after !== null) q = q.where('id', '>', after);
      return await q.execute();
    },
    (c) => c.id,
  );
  for await (const page of list) {
    for (const c of page) {
      const head = json({
        ...c,
        created_at: iso(c.created_at),
        updated_at: iso(c.updated_at),
        last_activity_at: iso(c.last_activity_at),
      });
      // The head object without its closing brace: the conversation's pages follow inside it.
      yield `${first ? '' : ','}${head.slice(0, -1)},`;
      first = false;
      yield* pagedArray('turns', turnPages(db, tenantId, c.id), (t) => ({
        ...t,
        created_at: iso(t.created_at),
        started_at: iso(t.started_at),
        ended_at: iso(t.ended_at),
      }));
      yield ',';
      yield* pagedArray('turn_images', imagePages(db, tenantId, c.id), (i) => ({
        id: i.id,
        turn_id: i.turn_id,
        media_type: i.media_type,
        created_at: iso(i.created_at),
        data_base64: i.data.toString('base64'),
      }));
      yield ',';
      yield* pagedArray('log_events', logPages(db, tenantId, c.id), (e) => ({
        id: String(e.id),
        turn_id: e.turn_id,
        stream: e.stream,
        ...logData(e.data),
        stage: e.stage,
        state: e.state,
        duration_ms: e.duration_ms,
        message: e.message,
        created_at: iso(e.created_at),
      }));
      yield '}';
    }
  }
  yield ']';
}

function turnPages(db: Db, tenantId: string, conversationId: string) {
  return pages(
    TURNS_PAGE,
    async (after: number | null, size) => {
      let q = db
        .selectFrom('turns')
        .select([
          'id',
          'seq',
          'prompt',
          'status',
          'exit_code',
          'error',
          'usage',
          'created_at',
          'started_at',
          'ended_at',
        ])
        .where('tenant_id', '=', tenantId)
        .where('conversation_id', '=', conversationId)
        .orderBy('conversation_id')
        .orderBy('seq')
        .limit(size);
      if (after !== null) q = q.where('seq', '>', after);
      return await q.execute();
    },
    (t) => t.seq,
  );
}

function imagePages(db: Db, tenantId: string, conversationId: string) {
  return pages(
    IMAGES_PAGE,
    async (after: string | null, size) => {
      let q = db
        .selectFrom('turn_images as i')
        .innerJoin('turns as t', 't.id', 'i.turn_id')
        .select(['i.id', 'i.turn_id', 'i.media_type', 'i.data', 'i.created_at'])
        .where('i.tenant_id', '=', tenantId)
        .where('t.conversation_id', '=', conversationId)
        .orderBy('i.id')
        .limit(size);
      if (after !== null) q = q.where('i.id', '>', after);
      return await q.execute();
    },
    (i) => i.id,
  );
}

function logPages(db: Db, tenantId: string, conversationId: string) {
  return pages(
    LOG_EVENTS_PAGE,
    async (after: string | null, size) => {
      // Ordered as log_events_conversation_idx (conversation_id, id): a page can be one range scan
      // of it, which reads no other conversation's rows.
      let q = db
        .selectFrom('log_events')
        .select(['id', 'turn_id', 'stream', 'data', 'stage', 'state', 'duration_ms', 'message', 'created_at'])
        .where('conversation_id', '=', conversationId)
        .where('tenant_id', '=', tenantId)
        .orderBy('conversation_id')
        .orderBy('id')
        .limit(size);
      if (after !== null) q = q.where('id', '>', after);
      return await q.execute();
    },
    (e) => String(e.id),
  );
}

function auditPages(db: Db, tenantId: string) {
  return pages(
    AUDIT_PAGE,
    async (after: string | null, size) => {
      let q = db
        .selectFrom('audit_events')
        .select([
          'id',
          'type',
          'actor_kind',
          'actor_user_id',
          'actor_api_key_id',
          'ip',
          'metadata',
          'created_at',
        ])
        .where('tenant_id', '=', tenantId)
        .orderBy('tenant_id')
        .orderBy('id')
        .limit(size);
      if (after !== null) q = q.where('id', '>', after);
      return await q.execute();
    },
    (e) => e.id,
  );
}
