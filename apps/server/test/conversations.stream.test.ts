// The conversation log streams over real HTTP: two app instances on one database, the real
// log writer and feed, a real SSE client.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { LogWriter } from '../src/conversations/contracts.ts';
import type { LogEventRow } from '../src/conversations/log/log-events.repo.ts';
import {
  createSecretRegistry,
  REDACTION_MARKER,
  type SecretRegistry,
} from '../src/conversations/log/redactor.ts';
import { secretForms } from '../src/conversations/log/secret-forms.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { type ConversationRow, insertConversation, logRows } from './helpers/conversation-rows.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { openSse, type SseMessage } from './helpers/sse-client.ts';

let a: TestApp;
let b: TestApp;
let baseA: string;
let baseB: string;
let user: TestUser;

before(async () => {
  a = await buildTestApp();
  b = await buildTestApp({ database: a.database });
  baseA = await listen(a);
  baseB = await listen(b);
  user = await createVerifiedUser(a.deps.db);
});
after(async () => {
  await b.close();
  await a.close();
});

async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

function writerOn(
  t: TestApp,
  conversation: ConversationRow,
  registry: SecretRegistry = createSecretRegistry(),
) {
  return t.deps.logWriters.create({
    lease: { tenantId: conversation.tenantId, conversationId: conversation.id, epoch: conversation.epoch },
    registry,
  });
}

async function conversationWith(
  lines: string[],
): Promise<{ conversation: ConversationRow; writer: LogWriter }> {
  const conversation = await insertConversation(a.deps.db, user.id);
  const writer = writerOn(a, conversation);
  for (const line of lines) writer.output('stdout', Buffer.from(line));
  await writer.flush();
  return { conversation, writer };
}

const dataOf = (m: SseMessage) => JSON.parse(m.data ?? '{}') as Record<string, unknown>;
const outputs = (messages: SseMessage[]) =>
  messages.filter((m) => m.event === 'stdout' || m.event === 'stderr').map((m) => dataOf(m)['text']);

describe('GET /api/conversations/:id/stream', () => {
  it('with wait=false sends the events that exist, then `event: end`, and closes', async () => {
    const { conversation, writer } = await conversationWith(['one\n']);
    writer.output('stderr', Buffer.from('two\n'));
    await writer.stage({ stage: 'turn', state: 'done', durationMs: 5 });
    await writer.close();
    const stream = await openSse(
      `${baseA}/api/conversations/${conversation.id}/stream?wait=false`,
      user.auth,
    );
    assert.equal(stream.status, 200);
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
    await stream.ended;
    const events = stream.messages.filter((m) => m.event !== 'comment');
    assert.deepEqual(
      events.map((m) => m.event),
      ['stdout', 'stderr', 'stage', 'end'],
    );
    const rows = await logRows(a.deps.db, conversation.id);
    assert.deepEqual(
      events.slice(0, 3).map((m) => m.id),
      rows.map((r) => r.id),
    );
    const stage = dataOf(events[2]!);
    assert.deepEqual(
      { ...stage, created_at: undefined },
      {
        id: rows[2]!.id,
        stream: 'stage',
        stage: 'turn',
        state: 'done',
        duration_ms: 5,
        message: null,
        turn_id: null,
        created_at: undefined,
      },
    );
    assert.deepEqual(dataOf(events[0]!)['text'], 'one\n');
    // The JSON page carries the same ids and payloads.
    const page = await a.app.inject({
      method: 'GET',
      url: `/api/conversations/${conversation.id}/events`,
      headers: user.auth,
    });
    assert.equal(page.statusCode, 200);
    assert.deepEqual(
      page.json().data,
      events.slice(0, 3).map((m) => dataOf(m)),
    );
    assert.deepEqual(page.json().meta, { next_cursor: null, has_more: false });
  });

  it('resumes strictly after Last-Event-ID (or ?after=)', async () => {
    const { conversation, writer } = await conversationWith(['a\n', 'b\n']);
    writer.output('stderr', Buffer.from('c\n'));
    writer.output('stdout', Buffer.from('d\n'));
    await writer.close();
    const rows = await logRows(a.deps.db, conversation.id);
    assert.equal(rows.length, 3); // a+b coalesce into one stdout row
    const resumed = await openSse(`${baseA}/api/conversations/${conversation.id}/stream?wait=false`, {
      ...user.auth,
      'last-event-id': rows[0]!.id,
    });
    await resumed.ended;
    assert.deepEqual(outputs(resumed.messages), ['c\n', 'd\n']);
    const viaQuery = await openSse(
      `${baseA}/api/conversations/${conversation.id}/stream?wait=false&after=${rows[1]!.id}`,
      user.auth,
    );
    await viaQuery.ended;
    assert.deepEqual(outputs(viaQuery.messages), ['d\n']);
  });

  it('filters by streams, and refuses an unknown stream or a malformed Last-Event-ID with 422', async () => {
    const { conversation, writer } = await conversationWith(['out\n']);
    writer.output('stderr', Buffer.from('err\n'));
    await writer.stage({ stage: 'setup', state: 'started' });
    await writer.close();
    const only = await openSse(
      `${baseA}/api/conversations/${conversation.id}/stream?wait=false&streams=stderr,stage`,
      user.auth,
    );
    await only.ended;
    assert.deepEqual(
      only.messages.filter((m) => m.event !== 'comment').map((m) => m.event),
      ['stderr', 'stage', 'end'],
    );
    for (const url of [
      `/api/conversations/${conversation.id}/stream?streams=stdout,secrets`,
      `/api/conversations/${conversation.id}/events?streams=bogus`,
      `/api/conversations/${conversation.id}/events?after=-1`,
      `/api/conversations/${conversation.id}/events?limit=0`,
    ]) {
      const res = await a.app.inject({ method: 'GET', url, headers: user.auth });
      assert.equal(res.statusCode, 422, url);
      assert.equal(res.json().error, 'validation_failed');
    }
    const badResume = await a.app.inject({
      method: 'GET',
      url: `/api/conversations/${conversation.id}/stream`,
      headers: { ...user.auth, 'last-event-id': '1 OR 1=1' },
    });
    assert.equal(badResume.statusCode, 422);
  });

  it("answers 404 for another tenant's conversation, an unknown id and a malformed id", async () => {
    const { conversation } = await conversationWith(['private\n']);
    const stranger = await createVerifiedUser(a.deps.db);
    for (const url of [
      `/api/conversations/${conversation.id}/stream?wait=false`,
      `/api/conversations/${conversation.id}/events`,
      '/api/conversations/00000000-0000-4000-8000-000000000000/events',
      '/api/conversations/not-a-uuid/stream',
    ]) {
      const res = await a.app.inject({ method: 'GET', url, headers: stranger.auth });
      assert.equal(res.statusCode, 404, url);
      assert.ok(!res.body.includes('private'));
    }
    const anonymous = await a.app.inject({
      method: 'GET',
      url: `/api/conversations/${conversation.id}/events`,
    });
    assert.equal(anonymous.statusCode, 401);
  });

  it('a viewer on another instance sees rows written through the first, live', async () => {
    const conversation = await insertConversation(a.deps.db, user.id);
    const stream = await openSse(`${baseB}/api/conversations/${conversation.id}/stream`, user.auth);
    const writer = writerOn(a, conversation);
    writer.output('stdout', Buffer.from('hello from A\n'));
    const first = await stream.next((m) => m.event === 'stdout');
    assert.equal(dataOf(first)['text'], 'hello from A\n');
    writer.output('stderr', Buffer.from('and more\n'));
    await writer.stage({ stage: 'turn', state: 'done' });
    await stream.next((m) => m.event === 'stage');
    assert.deepEqual(outputs(stream.messages), ['hello from A\n', 'and more\n']);
    stream.close();
    await writer.close();
  });

  it('a filtered viewer with nothing to read yet follows from the shared tail', async () => {
    // Only a stage row so far: a stdout viewer's first read finds nothing to send.
    const conversation = await insertConversation(a.deps.db, user.id);
    const writer = writerOn(a, conversation);
    await writer.stage({ stage: 'provision', state: 'started' });
    await writer.flush();
    const stream = await openSse(
      `${baseA}/api/conversations/${conversation.id}/stream?streams=stdout`,
      user.auth,
    );
    const tail = await a.deps.logTails.acquire(conversation.tenantId, conversation.id);
    try {
      // Rows that exist only in a feed signal (as this process's writer hands over what it
      // committed) reach a viewer that reads the shared tail, never one that queries PostgreSQL on
      // every wake-up. Each one follows the last row the tail holds, so the tail takes it.
      const handed = (n: number): LogEventRow => ({
        id: (tail.last + 1000n).toString(),
        turn_id: null,
        stream: 'stdout',
        data: Buffer.from(`handed ${n}\n`),
        stage: null,
        state: null,
        duration_ms: null,
        message: null,
        created_at: new Date(),
      });
      const deadline = Date.now() + 10_000;
      for (let n = 1; !stream.messages.some((m) => m.event === 'stdout'); n++) {
        assert.ok(Date.now() < deadline, 'the viewer never read from the shared tail');
        const row = handed(n);
        a.deps.feed.publish(conversation.id, {
          type: 'events',
          lastId: String(row.id),
          committed: { after: tail.last.toString(), rows: [row] },
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.match(String(outputs(stream.messages)[0]), /^handed \d+\n$/);
    } finally {
      tail.release();
      stream.close();
      await writer.close();
    }
  });

  it('delivers a large backlog in order, page by page, and /events pages through it with next_cursor', async () => {
    const conversation = await insertConversation(a.deps.db, user.id);
    const writer = writerOn(a, conversation, createSecretRegistry());
    const lines = Array.from({ length: 500 }, (_, i) => `line ${i}\n`);
    for (const line of lines) {
      writer.output('stdout', Buffer.from(line));
      writer.output('stderr', Buffer.from(`e${line}`));
    }
    await writer.close();
    const stream = await openSse(
      `${baseB}/api/conversations/${conversation.id}/stream?wait=false`,
      user.auth,
    );
    await stream.ended;
    const texts = stream.messages.filter((m) => m.event === 'stdout').map((m) => dataOf(m)['text']);
    assert.equal(texts.join(''), lines.join(''));
    const ids = stream.messages.filter((m) => m.id).map((m) => BigInt(m.id!));
    assert.ok(ids.every((id, i) => i === 0 || id > ids[i - 1]!));
    let cursor: string | null = '0';
    const seen: string[] = [];
    while (cursor !== null) {
      const res = await b.app.inject({
        method: 'GET',
        url: `/api/conversations/${conversation.id}/events?after=${cursor}&limit=150&streams=stdout`,
        headers: user.auth,
      });
      const body = res.json() as {
        data: { id: string; text: string }[];
        meta: { next_cursor: string | null };
      };
      seen.push(...body.data.map((e) => e.text));
      cursor = body.meta.next_cursor;
    }
    assert.equal(seen.join(''), lines.join(''));
  });

  it('never sends a secret: whole, split across writes at every offset, or base64 at each alignment', async () => {
    const secret = 'xoxb-5521-secret-Q7wP';
    const registry = createSecretRegistry();
    registry.register(secret);
    const conversation = await insertConversation(a.deps.db, user.id);
    const stream = await openSse(`${baseB}/api/conversations/${conversation.id}/stream`, user.auth);
    const writer = writerOn(a, conversation, registry);
    const line = Buffer.from(`token=${secret}\n`);
    writer.output('stdout', line);
    for (let at = 0; at <= line.length; at++) {
      writer.output('stdout', line.subarray(0, at));
      writer.output('stdout', line.subarray(at));
    }
    for (const alignment of [0, 1, 2])
      writer.output(
        'stderr',
        Buffer.from(`${Buffer.from(`${'z'.repeat(alignment)}${secret}`).toString('base64')}\n`),
      );
    await writer.stage({ stage: 'turn', state: 'failed', message: `exit: ${secret}` });
    await writer.close();
    await stream.next((m) => m.event === 'stage');
    stream.close();
    const received = stream.raw();
    assert.ok(received.includes(REDACTION_MARKER));
    for (const form of secretForms(secret)) {
      const text = form.toString();
      assert.ok(!received.includes(text), 'SSE output');
      assert.ok(
        !JSON.stringify((await logRows(a.deps.db, conversation.id)).map((r) => String(r.data))).includes(
          text,
        ),
      );
      for (const log of [...a.logs, ...b.logs]) assert.ok(!log.includes(text), 'server logs');
    }
  });

  it('tells the viewer when the owner is gone, instead of silent heartbeats', async () => {
    b.deps.streamOptions.heartbeatMs = 100;
    try {
      const conversation = await insertConversation(a.deps.db, user.id, { status: 'running' });
      // An owner holds the lock (as owner.ts does) on its own connection.
      const owner = new pg.Client({ connectionString: a.database.url });
      await owner.connect();
      const key = `paddock:conversation:${conversation.id}`;
      await owner.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [key]);
      const stream = await openSse(`${baseB}/api/conversations/${conversation.id}/stream`, user.auth);
      await stream.next((m) => m.event === 'comment' && m.data === 'ping');
      await stream.next((m) => m.event === 'comment' && m.data === 'ping', 5000, stream.messages.length);
      assert.ok(!stream.messages.some((m) => m.event === 'owner_lost'), 'owned: pings only');
      // The owner dies (its session ends, the lock goes with it).
      await owner.end();
      const lost = await stream.next((m) => m.event === 'owner_lost');
      assert.deepEqual(dataOf(lost), { conversation_id: conversation.id, status: 'running' });
      // And again at the next heartbeat: never a plain ping while nobody owns it.
      const from = stream.messages.length;
      await stream.next((m) => m.event === 'owner_lost', 5000, from);
      assert.ok(!stream.messages.slice(from).some((m) => m.event === 'comment'));
      stream.close();
    } finally {
      b.deps.streamOptions.heartbeatMs = 15_000;
    }
  });

  it('reacts to a feed owner_lost signal at once, and ends the stream of a deleted conversation', async () => {
    const conversation = await insertConversation(a.deps.db, user.id, { status: 'pending' });
    const stream = await openSse(`${baseB}/api/conversations/${conversation.id}/stream`, user.auth);
    // The open itself checks: nobody owns this pending conversation.
    await stream.next((m) => m.event === 'owner_lost');
    const from = stream.messages.length;
    a.deps.feed.publish(conversation.id, { type: 'owner_lost' });
    await stream.next((m) => m.event === 'owner_lost', 2000, from);
    await a.deps.db.deleteFrom('conversations').where('id', '=', conversation.id).execute();
    a.deps.feed.publish(conversation.id, { type: 'status', status: 'deleted' });
    const end = await stream.next((m) => m.event === 'end', 3000);
    assert.deepEqual(dataOf(end), { reason: 'deleted' });
    await stream.ended;
  });

  it('clears unread when the owner reads, not when the sandbox callback key does', async () => {
    const { conversation } = await conversationWith(['done\n']);
    await a.deps.db
      .updateTable('conversations')
      .set({ unread: true })
      .where('id', '=', conversation.id)
      .execute();
    const unread = async () =>
      (
        await a.deps.db
          .selectFrom('conversations')
          .select('unread')
          .where('id', '=', conversation.id)
          .executeTakeFirstOrThrow()
      ).unread;
    const callback = await a.deps.apiKeys.mintConversationKey(user.id, conversation.id);
    const bySandbox = await a.app.inject({
      method: 'GET',
      url: `/api/conversations/${conversation.id}/events`,
      headers: { authorization: `Bearer ${callback.key}` },
    });
    assert.equal(bySandbox.statusCode, 200);
    const sandboxStream = await openSse(`${baseA}/api/conversations/${conversation.id}/stream?wait=false`, {
      authorization: `Bearer ${callback.key}`,
    });
    await sandboxStream.ended;
    assert.equal(await unread(), true);
    const byOwner = await openSse(
      `${baseA}/api/conversations/${conversation.id}/stream?wait=false`,
      user.auth,
    );
    await byOwner.ended;
    assert.equal(await unread(), false);
  });

  it('a callback key reads its own conversation and those it started, and no other conversation of the tenant', async () => {
    const { conversation } = await conversationWith(['mine\n']);
    const child = await insertConversation(a.deps.db, user.id, { parentId: conversation.id });
    const { conversation: sibling } = await conversationWith(['someone else\n']);
    const callback = await a.deps.apiKeys.mintConversationKey(user.id, conversation.id);
    const as = { authorization: `Bearer ${callback.key}` };
    const get = (id: string, path: string) =>
      a.app.inject({ method: 'GET', url: `/api/conversations/${id}/${path}`, headers: as });
    assert.equal((await get(conversation.id, 'events')).statusCode, 200);
    assert.equal((await get(child.id, 'events')).statusCode, 200);
    for (const path of ['events', 'stream?wait=false']) {
      const res = await get(sibling.id, path);
      assert.equal(res.statusCode, 404, path);
      assert.ok(!res.body.includes('someone else'));
    }
  });
});
