// The feed across "processes": two feeds on one real PostgreSQL database, as two servers would be.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../../test/helpers/database.ts';
import { createLogger } from '../../observability/logger.ts';
import type { FeedSignal } from '../contracts.ts';
import { createFeed, FEED_CHANNEL, type PgFeed, RESYNC_LAST_ID } from './feed.ts';

let database: TestDatabase;
const logger = createLogger({ level: 'silent' });
const feeds: PgFeed[] = [];

function newFeed(): PgFeed {
  const feed = createFeed({
    pool: database.handle.pool,
    clientConfig: { connectionString: database.url },
    logger,
    reconnectDelayMs: 20,
  });
  feeds.push(feed);
  return feed;
}

before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  for (const feed of feeds) await feed.close();
  await database.drop();
});

/** Resolves with the first signal matching `pick`, or rejects after `ms`. */
function next(feed: PgFeed, conversationId: string, pick: (s: FeedSignal) => boolean, ms = 5000) {
  return new Promise<FeedSignal>((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new Error('no signal'));
    }, ms);
    const stop = feed.subscribe(conversationId, (signal) => {
      if (!pick(signal)) return;
      clearTimeout(timer);
      stop();
      resolve(signal);
    });
  });
}

const notResync = (s: FeedSignal) => !(s.type === 'events' && s.lastId === RESYNC_LAST_ID);
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the feed', () => {
  it('wakes a subscriber in another process with the signal published', async () => {
    const a = newFeed();
    const b = newFeed();
    await b.listening();
    const id = randomUUID();
    const events = next(b, id, notResync);
    a.publish(id, { type: 'events', lastId: '42' });
    assert.deepEqual(await events, { type: 'events', lastId: '42' });
    const status = next(b, id, (s) => s.type === 'status');
    a.publish(id, { type: 'status', status: 'idle' });
    assert.deepEqual(await status, { type: 'status', status: 'idle' });
    const lost = next(b, id, (s) => s.type === 'owner_lost');
    a.publish(id, { type: 'owner_lost' });
    assert.deepEqual(await lost, { type: 'owner_lost' });
  });

  it('delivers a local publish once, at once, not again when its NOTIFY comes back', async () => {
    const feed = newFeed();
    await feed.listening();
    const id = randomUUID();
    const seen: FeedSignal[] = [];
    const stop = feed.subscribe(id, (s) => seen.push(s));
    feed.publish(id, { type: 'events', lastId: '7' });
    assert.deepEqual(seen, [{ type: 'events', lastId: '7' }], 'delivered synchronously');
    await wait(300);
    stop();
    assert.deepEqual(seen, [{ type: 'events', lastId: '7' }]);
  });

  it('uses one listening connection for any number of conversations and readers', async () => {
    const feed = newFeed();
    const stops = Array.from({ length: 50 }, () => feed.subscribe(randomUUID(), () => {}));
    await feed.listening();
    const pid = feed.listenerPid();
    assert.ok(pid);
    const { rows } = await database.handle.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = $1`,
      [`LISTEN ${FEED_CHANNEL}`],
    );
    // One per feed of this file that listens (each stands for one process).
    assert.equal(rows[0]!.n, feeds.filter((f) => f.listenerPid() !== null).length);
    for (const stop of stops) stop();
  });

  it('re-listens after its connection is killed, tells readers to re-query, and hears wake-ups again', async () => {
    const a = newFeed();
    const b = newFeed();
    await b.listening();
    const id = randomUUID();
    const before = b.listenerPid();
    const resync = next(b, id, (s) => s.type === 'events' && s.lastId === RESYNC_LAST_ID);
    await database.handle.pool.query('SELECT pg_terminate_backend($1)', [before]);
    await resync;
    assert.notEqual(b.listenerPid(), before);
    const events = next(b, id, notResync);
    a.publish(id, { type: 'events', lastId: '99' });
    assert.deepEqual(await events, { type: 'events', lastId: '99' });
  });

  it('coalesces a burst of events signals for one conversation into few NOTIFYs, ending at the latest', async () => {
    const a = newFeed();
    const b = newFeed();
    await b.listening();
    const id = randomUUID();
    const seen: string[] = [];
    const stop = b.subscribe(id, (s) => {
      if (s.type === 'events' && s.lastId !== RESYNC_LAST_ID) seen.push(s.lastId);
    });
    for (let i = 1; i <= 200; i++) a.publish(id, { type: 'events', lastId: String(i) });
    await wait(500);
    stop();
    assert.ok(seen.length >= 1 && seen.length < 200, `${seen.length} wake-ups`);
    assert.equal(seen.at(-1), '200');
  });
});
