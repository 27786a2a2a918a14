// Issue 35, finding 3 and 8: a log stream's viewer ends with its client, at any moment; open
// streams per user are capped; a delete ends the viewers at once. Two app instances on one
// database (as two replicas), the real log writer and feed, real sockets.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import {
  MAX_STREAMS_PER_USER,
  STREAMS_RETRY_AFTER_SECONDS,
} from '../src/conversations/api/stream-viewers.ts';
import type { LogWriter } from '../src/conversations/contracts.ts';
import { createSecretRegistry } from '../src/conversations/log/redactor.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { type ConversationRow, insertConversation } from './helpers/conversation-rows.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { openSse, type SseStream } from './helpers/sse-client.ts';

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

function writerOn(t: TestApp, conversation: ConversationRow): LogWriter {
  return t.deps.logWriters.create({
    lease: { tenantId: conversation.tenantId, conversationId: conversation.id, epoch: conversation.epoch },
    registry: createSecretRegistry(),
  });
}

/** The gauge as /metrics serves it. */
async function gauge(t: TestApp): Promise<number> {
  const text = await t.deps.metrics.registry.getSingleMetricAsString('paddock_conversation_stream_viewers');
  const match = /^paddock_conversation_stream_viewers (\d+)$/m.exec(text);
  assert.ok(match, text);
  return Number(match[1]);
}

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/** Transactions committed in the test database per second, over `ms`. */
async function commitsPerSecond(ms: number): Promise<number> {
  const read = async () => {
    // The statistics of other backends reach the view at most once a second (and when idle).
    await sql`SELECT pg_stat_clear_snapshot()`.execute(a.deps.db);
    const { rows } = await sql<{ n: string }>`
      SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()`.execute(
      a.deps.db,
    );
    return Number(rows[0]!.n);
  };
  const first = await read();
  await sleep(ms);
  return ((await read()) - first - 1) / (ms / 1000);
}

async function until(what: string, ok: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

async function newestRow(conversationId: string): Promise<string> {
  const row = await a.deps.db
    .selectFrom('log_events')
    .select((eb) => eb.fn.max('id').as('id'))
    .where('conversation_id', '=', conversationId)
    .executeTakeFirst();
  return String(row?.id ?? '0');
}

/** A small seeded generator: a failing run can be replayed with its seed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type AbortPoint = 'before headers' | 'after headers' | 'mid-replay' | 'mid-live';

/**
 * Opens one stream and drops its socket at `point`; resolves with whether the point was reached
 * as asked (a response can beat a 'before headers' abort; a drop then counts as after headers).
 */
function openAndAbort(url: string, headers: Record<string, string>, point: AbortPoint, delayMs: number) {
  return new Promise<AbortPoint>((resolve) => {
    let reached: AbortPoint = point;
    const request = http.get(url, { agent: false, headers: { accept: 'text/event-stream', ...headers } });
    const drop = () => {
      request.destroy();
      resolve(reached);
    };
    request.on('error', () => resolve(reached));
    if (point === 'before headers') {
      request.on('response', () => {
        reached = 'after headers';
      });
      setTimeout(drop, delayMs);
      return;
    }
    request.on('response', (response) => {
      if (point === 'after headers') return void setTimeout(drop, delayMs);
      // mid-replay: the first page of the backlog came; mid-live: a row written after the open.
      response.on('data', (chunk: Buffer) => {
        if (chunk.includes('event: stdout')) drop();
      });
    });
  });
}

describe('log stream viewers', () => {
  it('1,000 streams aborted at random points leave no viewer, timer or database activity behind', {
    timeout: 180_000,
  }, async (t) => {
    const seed = Number(process.env['STREAM_ABORT_SEED'] ?? Date.now() % 100_000);
    const next = random(seed);
    const note = `seed ${seed} (STREAM_ABORT_SEED replays it)`;
    // Leaked viewers would each query PostgreSQL on every heartbeat: a short one shows them.
    a.deps.streamOptions.heartbeatMs = 100;
    try {
      const idleConversation = await insertConversation(a.deps.db, user.id, { status: 'idle' });
      // A backlog of many pages (64 rows each) to abort in the middle of its replay.
      const backlog = writerOn(a, idleConversation);
      for (let i = 0; i < 400; i++) {
        backlog.output('stdout', Buffer.from(`${'x'.repeat(200)} backlog line ${i}\n`));
        await backlog.flush();
      }
      await backlog.close();
      const live = await insertConversation(a.deps.db, user.id, { status: 'running' });
      const liveWriter = writerOn(a, live);
      liveWriter.output('stdout', Buffer.from('first\n'));
      await liveWriter.flush();
      await a.deps.feed.listening();
      await sleep(1500);
      const baseline = { timers: timers(), commits: await commitsPerSecond(3000), gauge: await gauge(a) };
      assert.equal(baseline.gauge, 0);

      // Live output while the streams come and go: a line every 10 ms.
      let writing = true;
      const producing = (async () => {
        for (let i = 0; writing; i++) {
          liveWriter.output('stdout', Buffer.from(`live ${i}\n`));
          await liveWriter.flush();
          await sleep(10);
        }
      })();
      const points: AbortPoint[] = ['before headers', 'after headers', 'mid-replay', 'mid-live'];
      const reached = new Map<AbortPoint, number>();
      let peak = 0;
      const total = 1000;
      let started = 0;
      const worker = async () => {
        while (started < total) {
          started++;
          const point = points[Math.floor(next() * points.length)]!;
          const delay = Math.floor(next() * (point === 'before headers' ? 4 : 30));
          // mid-live: from the newest row on, so only rows written after the open come.
          const url =
            point === 'mid-replay'
              ? `${baseA}/api/conversations/${idleConversation.id}/stream`
              : point === 'mid-live'
                ? `${baseA}/api/conversations/${live.id}/stream?after=${await newestRow(live.id)}`
                : `${baseA}/api/conversations/${(next() < 0.5 ? idleConversation : live).id}/stream`;
          const got = await openAndAbort(url, user.auth, point, delay);
          reached.set(got, (reached.get(got) ?? 0) + 1);
          peak = Math.max(peak, await gauge(a));
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      writing = false;
      await producing;
      await liveWriter.close();
      for (const point of points) assert.ok((reached.get(point) ?? 0) > 50, `${point}: ${note}`);
      assert.ok(peak > 0, `the gauge counts open streams (${note})`);

      // Everything measured first, then asserted: a failure reports all three figures.
      const settled = (what: string, ok: () => Promise<boolean> | boolean) =>
        until(what, ok).then(
          () => true,
          () => false,
        );
      const gaugeSettled = await settled('the gauge is back to 0', async () => (await gauge(a)) === 0);
      const timersSettled = await settled('the timers are back', () => timers() <= baseline.timers + 2);
      await sleep(1500);
      const commits = await commitsPerSecond(3000);
      const figures =
        `${note}; aborted ${JSON.stringify(Object.fromEntries(reached))}; peak gauge ${peak}, ` +
        `${await gauge(a)} after; timers ${baseline.timers} before, ${timers()} after; ` +
        `PostgreSQL commits ${baseline.commits.toFixed(1)}/s before, ${commits.toFixed(1)}/s after`;
      t.diagnostic(figures);
      assert.ok(gaugeSettled, `the gauge: ${figures}`);
      assert.ok(timersSettled, `timers: ${figures}`);
      assert.ok(commits <= baseline.commits * 2 + 20, `PostgreSQL commits: ${figures}`);
    } finally {
      a.deps.streamOptions.heartbeatMs = 15_000;
    }
  });

  it('a turn that nobody watches ends unread, also when its viewers left while the stream opened', async () => {
    a.deps.streamOptions.heartbeatMs = 100;
    try {
      const conversation = await insertConversation(a.deps.db, user.id, { status: 'running' });
      const writer = writerOn(a, conversation);
      writer.output('stdout', Buffer.from('working\n'));
      await writer.flush();
      // Owners open and leave at once, at several moments of the open.
      for (let i = 0; i < 60; i++)
        await openAndAbort(
          `${baseA}/api/conversations/${conversation.id}/stream`,
          user.auth,
          'before headers',
          i % 4,
        );
      await until('every viewer is gone', async () => (await gauge(a)) === 0);
      // The turn ends as its owner ends it: the row unread, a stage row, a status signal.
      await a.deps.db
        .updateTable('conversations')
        .set({ unread: true, status: 'idle' })
        .where('id', '=', conversation.id)
        .execute();
      await writer.stage({ stage: 'turn', state: 'done', durationMs: 5 });
      await writer.close();
      a.deps.feed.publish(conversation.id, { type: 'status', status: 'idle' });
      await sleep(1000);
      const row = await a.deps.db
        .selectFrom('conversations')
        .select('unread')
        .where('id', '=', conversation.id)
        .executeTakeFirstOrThrow();
      assert.equal(row.unread, true);
    } finally {
      a.deps.streamOptions.heartbeatMs = 15_000;
    }
  });

  it('refuses a user past the cap of open streams with 429 too_many_streams and Retry-After', {
    timeout: 60_000,
  }, async () => {
    const heavy = await createVerifiedUser(a.deps.db);
    const conversation = await insertConversation(a.deps.db, heavy.id, { status: 'idle' });
    const url = `${baseA}/api/conversations/${conversation.id}/stream`;
    const open: SseStream[] = [];
    try {
      for (let i = 0; i < MAX_STREAMS_PER_USER; i++) {
        const stream = await openSse(url, heavy.auth);
        assert.equal(stream.status, 200);
        open.push(stream);
      }
      assert.equal(await gauge(a), MAX_STREAMS_PER_USER);
      const giveUp = new AbortController();
      const refused = await fetch(url, { headers: heavy.auth, signal: giveUp.signal });
      try {
        assert.equal(refused.status, 429);
        assert.equal(refused.headers.get('retry-after'), String(STREAMS_RETRY_AFTER_SECONDS));
        const body = (await refused.json()) as Record<string, unknown>;
        assert.equal(body['error'], 'too_many_streams');
        assert.equal(body['limit'], MAX_STREAMS_PER_USER);
      } finally {
        giveUp.abort();
      }
      // The cap is per user, and per process: another user and the other replica still serve.
      const other = await insertConversation(a.deps.db, user.id, { status: 'idle' });
      const theirs = await openSse(`${baseA}/api/conversations/${other.id}/stream`, user.auth);
      assert.equal(theirs.status, 200);
      theirs.close();
      const elsewhere = await openSse(`${baseB}/api/conversations/${conversation.id}/stream`, heavy.auth);
      assert.equal(elsewhere.status, 200);
      elsewhere.close();
      // A closed stream gives its slot back.
      open.pop()!.close();
      await until('a slot is free', async () => (await gauge(a)) === MAX_STREAMS_PER_USER - 1);
      const again = await openSse(url, heavy.auth);
      assert.equal(again.status, 200);
      open.push(again);
    } finally {
      for (const stream of open) stream.close();
    }
    await until('every slot is back', async () => (await gauge(a)) === 0);
  });

  it('a viewer of a deleted idle conversation gets `end` at once, on another instance too', async () => {
    const conversation = await insertConversation(a.deps.db, user.id, { status: 'idle' });
    // The default heartbeat (15 s): only the delete itself can end these streams in time.
    const here = await openSse(`${baseA}/api/conversations/${conversation.id}/stream`, user.auth);
    const there = await openSse(`${baseB}/api/conversations/${conversation.id}/stream`, user.auth);
    await here.next((m) => m.event === 'comment' || m.event === 'message', 500).catch(() => {});
    const res = await a.app.inject({
      method: 'DELETE',
      url: `/api/conversations/${conversation.id}`,
      headers: user.auth,
    });
    assert.equal(res.statusCode, 204);
    for (const stream of [here, there]) {
      const end = await stream.next((m) => m.event === 'end', 3000);
      assert.deepEqual(JSON.parse(end.data ?? '{}'), { reason: 'deleted' });
      await stream.ended;
    }
  });
});
