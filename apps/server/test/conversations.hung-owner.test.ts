// Issue 39, deliverable 2: a hung owner is replaced within a bounded time (owner.ts invariant 7).
// Two replicas (the real `serve` boot with the scripted runtime, the production lifecycle tick of
// 60 s and orphan probe of 2 s) on one PostgreSQL and one sandboxd, with OWNER_LEASE_SECONDS=6.
// SIGSTOP of the owner mid-turn keeps its database connections (so its locks) open: the other
// replica fences it once its lease expired and takes the turn over; a viewer there is told
// `owner_lost` meanwhile; the owner, woken with SIGCONT while the turn still runs, writes nothing
// (the stored log is the program's output byte for byte) and stops its servers.
// Then, in this process with a database role that is no superuser: the fence ends another
// backend of the same role and frees its locks, two replicas fencing at once fence once, and an
// owner whose row was fenced notices it at its next renewal and lets go of its locks itself.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { after, before, it } from 'node:test';
import pg from 'pg';
import { startTestSandboxd, type TestSandboxd } from '../../sandboxd/test/harness.ts';
import { DEFAULT_TICK_MS, ORPHAN_PROBE_MS } from '../src/conversations/engine/lifecycle.ts';
import { createOwnership, type Ownership } from '../src/conversations/engine/owner.ts';
import { freePort } from '../src/db/embedded.ts';
import { createLogger } from '../src/observability/logger.ts';
import { insertConversation, storedText } from './helpers/conversation-rows.ts';
import { createTestDatabase, type TestDatabase, withAdmin } from './helpers/database.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { scriptedServerProcess } from './helpers/scripted-server.ts';
import { openSse } from './helpers/sse-client.ts';

const LEASE_SECONDS = 6;
const LINES = 1500;

let sandboxd: TestSandboxd;
let database: TestDatabase;
let user: TestUser;
let envA: NodeJS.ProcessEnv;
let envB: NodeJS.ProcessEnv;
let logA = '';
let logB = '';
const a = scriptedServerProcess(() => envA, 30_000, {
  tickMs: DEFAULT_TICK_MS,
  onLog: (chunk) => {
    logA += chunk;
  },
});
const b = scriptedServerProcess(() => envB, 30_000, {
  tickMs: DEFAULT_TICK_MS,
  onLog: (chunk) => {
    logB += chunk;
  },
});
let urlA = '';
let urlB = '';
const role = `r_${randomBytes(5).toString('hex')}`;

async function api(url: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { ...user.auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const storedStdout = (id: string) => storedText(database.handle.db, id, 'stdout');

async function ownerOf(id: string) {
  return await database.handle.db
    .selectFrom('conversations')
    .select(['owner_epoch', 'owner_node'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

before(async () => {
  sandboxd = await startTestSandboxd();
  database = await createTestDatabase();
  user = await createVerifiedUser(database.handle.db);
  const common = {
    PATH: process.env['PATH'],
    TMPDIR: process.env['TMPDIR'],
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    DATABASE_URL: database.url,
    DATABASE_SSL: 'false',
    MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
    EMAIL_DELIVERY: 'none',
    SANDBOX_BASE_URL: sandboxd.url,
    SANDBOX_TOKEN: sandboxd.token,
    RATE_LIMIT_MAX: '100000',
    OWNER_LEASE_SECONDS: String(LEASE_SECONDS),
  };
  envA = { ...common, PORT: String(await freePort()) };
  envB = { ...common, PORT: String(await freePort()) };
  [urlA, urlB] = await Promise.all([a.start(), b.start()]);
});

after(async () => {
  const pid = a.pid();
  if (pid) process.kill(pid, 'SIGCONT'); // a failed assertion may have left it stopped
  await Promise.all([a.stop('SIGTERM'), b.stop('SIGTERM')]);
  await sandboxd.stop();
  await database.drop();
  await withAdmin((c) => c.query(`DROP ROLE IF EXISTS ${role}`));
});

it('a SIGSTOPped owner is replaced within its lease; a viewer sees owner_lost; woken, it writes nothing and stops its servers', async (t) => {
  const agent = await api(urlA, 'POST', '/api/agents', {
    name: 'numbered',
    model: 'anthropic/claude-sonnet-4-5',
    runtime: 'claude',
  });
  assert.equal(agent.status, 201);
  const script = `i=1; while [ $i -le ${LINES} ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done`;
  const started = await api(urlA, 'POST', '/api/conversations', {
    agent_id: agent.body['id'],
    prompt: script,
  });
  assert.equal(started.status, 201);
  const id = started.body['id'] as string;
  const viewer = await openSse(`${urlB}/api/conversations/${id}/stream?streams=stdout`, user.auth);
  await until('output to be persisted', async () =>
    (await storedStdout(id)).includes('line 40\n') ? true : undefined,
  );
  const nodeA = `${hostname()}:${a.pid()}`;
  const nodeB = `${hostname()}:${b.pid()}`;
  const before = await ownerOf(id);
  assert.equal(before.owner_node, nodeA);

  process.kill(a.pid()!, 'SIGSTOP');
  const stoppedAt = Date.now();
  const viewerFrom = viewer.messages.length;
  await until(
    'B to own the conversation',
    async () => {
      const now = await ownerOf(id);
      return now.owner_node === nodeB && BigInt(now.owner_epoch) > BigInt(before.owner_epoch)
        ? true
        : undefined;
    },
    60_000,
  );
  const takeoverMs = Date.now() - stoppedAt;
  // The bound (docs/operations.md): the lease plus one probe interval, and the adoption itself.
  const bound = LEASE_SECONDS * 1000 + ORPHAN_PROBE_MS + 4000;
  assert.ok(takeoverMs < bound, `taken over after ${takeoverMs} ms (bound ${bound} ms)`);
  t.diagnostic(`taken over ${takeoverMs} ms after SIGSTOP (lease ${LEASE_SECONDS} s)`);
  assert.ok(
    !(await storedStdout(id)).includes(`line ${LINES}\n`),
    'the turn was still running at the takeover',
  );
  assert.match(logB, /fenced a conversation owner whose lease expired \(unresponsive\)/);
  // The viewer on B was told while nobody owned the conversation.
  await until('the viewer to see owner_lost', async () =>
    viewer.messages.slice(viewerFrom).some((m) => m.event === 'owner_lost') ? true : undefined,
  );

  // A wakes while its turn still runs on B: it writes nothing and stops its servers.
  const logAtWake = logA.length;
  process.kill(a.pid()!, 'SIGCONT');
  await until('A to stop its servers', async () =>
    /conversation ownership connection lost: stopping owned conversations/.test(logA.slice(logAtWake))
      ? true
      : undefined,
  );
  const turn = await until('turn 1 to end on B', async () => {
    const res = await api(urlB, 'GET', `/api/conversations/${id}/turns`);
    const t = (res.body['data'] as { seq: number; status: string }[]).find((x) => x.seq === 1);
    return t && !['queued', 'running'].includes(t.status) ? t : undefined;
  });
  assert.equal(turn.status, 'succeeded');
  const expected = Array.from({ length: LINES }, (_, i) => `line ${i + 1}\n`).join('');
  // Byte for byte: nothing A held when it was stopped, nor read after it woke, was stored twice.
  assert.equal(await storedStdout(id), expected);
  await until('the viewer to have every line', async () => {
    const seen = viewer.messages
      .filter((m) => m.event === 'stdout')
      .map((m) => (JSON.parse(m.data ?? '{}') as { text: string }).text)
      .join('');
    return seen.length >= expected.length ? seen : undefined;
  }).then((seen) => assert.equal(seen, expected));
  viewer.close();
  const after = await ownerOf(id);
  assert.equal(after.owner_node, nodeB, 'B owned it to the end');
  // A is still a working replica: it registered a fresh lease on its new connection and answers.
  await until('A to hold a fresh lease', async () => {
    const row = await database.handle.db
      .selectFrom('owner_nodes')
      .select('lease_until')
      .where('node', '=', nodeA)
      .executeTakeFirst();
    return row && row.lease_until.getTime() > Date.now() ? true : undefined;
  });
  assert.equal((await api(urlA, 'GET', `/api/conversations/${id}`)).status, 200);
});

it('without superuser: the fence ends the hung backend of the same role and frees its locks, once however many replicas fence, and a fenced owner that wakes lets go itself', async () => {
  await withAdmin(async (c) => {
    await c.query(`CREATE ROLE ${role} LOGIN PASSWORD 'pw' NOSUPERUSER NOCREATEROLE`);
  });
  await database.handle.pool.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}`);
  const url = new URL(database.url);
  url.username = role;
  url.password = 'pw';
  const pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
  const logger = createLogger({ level: 'silent' });
  const owners: Ownership[] = [];
  const ownership = (node: string, leaseSeconds = 30) => {
    const o = createOwnership({ pool, node, logger, leaseSeconds });
    owners.push(o);
    return o;
  };
  try {
    const superuser = await pool.query<{ rolsuper: boolean }>(
      'SELECT rolsuper FROM pg_roles WHERE rolname = current_user',
    );
    assert.equal(superuser.rows[0]?.rolsuper, false);
    const conv = await insertConversation(database.handle.db, user.id, { status: 'running' });

    // The hung owner holds the lock; its lease has run out.
    const hung = ownership('hung');
    let lost = 0;
    hung.onLost(() => lost++);
    const lease = await hung.tryAcquire(user.id, conv.id);
    assert.ok(lease);
    assert.equal(await hung.isOwned(conv.id), true);
    await database.handle.pool.query(
      `UPDATE owner_nodes SET lease_until = now() - interval '1 second' WHERE node = 'hung'`,
    );
    // A held lock whose holder's lease expired is no owner (the viewers' owner_lost).
    assert.equal(await hung.isOwned(conv.id), false);

    const [x, y] = [ownership('x'), ownership('y')];
    await Promise.all([x.open(), y.open()]);
    assert.equal(await x.tryAcquire(user.id, conv.id), null, 'the lock is still held');
    const told: string[] = [];
    const [fx, fy] = await Promise.all([
      x.fenceExpired((f) => told.push(...f.flatMap((n) => n.conversations.map((c) => c.conversationId)))),
      y.fenceExpired((f) => told.push(...f.flatMap((n) => n.conversations.map((c) => c.conversationId)))),
    ]);
    assert.deepEqual(
      [...fx, ...fy].map((f) => f.node),
      ['hung'],
      'fenced once',
    );
    assert.deepEqual(told, [conv.id], 'its live conversation announced once');
    const fencedEpoch = (await ownerOf(conv.id)).owner_epoch;
    assert.ok(BigInt(fencedEpoch) > BigInt(lease.epoch), 'the fence bumped the epoch');
    await until(
      'the hung owner to hear its connection end',
      async () => (lost === 1 ? true : undefined),
      10_000,
    );
    const taken = await x.tryAcquire(user.id, conv.id);
    assert.ok(taken, 'the lock is free after the fence');
    assert.ok(BigInt(taken.epoch) > BigInt(fencedEpoch));

    // An owner whose row was fenced but whose backend could not be ended (here: the row alone
    // is deleted) finds out at its next renewal and ends its connection, freeing its locks.
    const slow = ownership('slow', 1.5);
    let slowLost = 0;
    slow.onLost(() => slowLost++);
    const conv2 = await insertConversation(database.handle.db, user.id, { status: 'running' });
    assert.ok(await slow.tryAcquire(user.id, conv2.id));
    await database.handle.pool.query(`DELETE FROM owner_nodes WHERE node = 'slow'`);
    await until('the renewal to notice the fence', async () => (slowLost === 1 ? true : undefined), 10_000);
    assert.ok(await y.tryAcquire(user.id, conv2.id), 'its lock is free');
    // It comes back as a fresh node with a fresh lease.
    await until(
      'the slow node to register again',
      async () =>
        (await database.handle.db
          .selectFrom('owner_nodes')
          .select('node')
          .where('node', '=', 'slow')
          .executeTakeFirst())
          ? true
          : undefined,
      10_000,
    );
  } finally {
    await Promise.all(owners.map((o) => o.close()));
    await pool.end();
  }
});
