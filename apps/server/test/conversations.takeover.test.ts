// Issue 39, deliverable 1: two replicas (server processes, the real `serve` boot with the
// scripted runtime, the production lifecycle tick of 60 s) on one PostgreSQL and one sandboxd.
// kill -9 of the owner mid-turn: the other replica owns the conversation within 5 s (its orphan
// probe, not the minute's tick), the stored log equals the program's output byte for byte, and
// a viewer connected to the surviving replica sees every byte once. A follow-up prompt sent to
// an orphan takes it over at once instead of waiting.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from '../../sandboxd/test/harness.ts';
import { DEFAULT_TICK_MS } from '../src/conversations/engine/lifecycle.ts';
import { freePort } from '../src/db/embedded.ts';
import { storedText } from './helpers/conversation-rows.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { scriptedServerProcess } from './helpers/scripted-server.ts';
import { openSse } from './helpers/sse-client.ts';

const LINES = 800;

let sandboxd: TestSandboxd;
let database: TestDatabase;
let user: TestUser;
let envA: NodeJS.ProcessEnv;
let envB: NodeJS.ProcessEnv;
let envC = '';
const a = scriptedServerProcess(() => envA, 30_000, { tickMs: DEFAULT_TICK_MS });
const b = scriptedServerProcess(() => envB, 30_000, { tickMs: DEFAULT_TICK_MS });
let urlA = '';
let urlB = '';

async function api(url: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { ...user.auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const storedStdout = (id: string) => storedText(database.handle.db, id, 'stdout');

async function epochOf(id: string): Promise<bigint> {
  const row = await database.handle.db
    .selectFrom('conversations')
    .select('owner_epoch')
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return BigInt(row.owner_epoch);
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

async function turnEnded(url: string, id: string, seq: number) {
  return await until(`turn ${seq} to end`, async () => {
    const res = await api(url, 'GET', `/api/conversations/${id}/turns`);
    const turn = (res.body['data'] as { seq: number; status: string }[]).find((t) => t.seq === seq);
    return turn && !['queued', 'running'].includes(turn.status) ? turn : undefined;
  });
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
  };
  envA = { ...common, PORT: String(await freePort()) };
  envB = { ...common, PORT: String(await freePort()) };
  envC = String(await freePort());
  [urlA, urlB] = await Promise.all([a.start(), b.start()]);
});

after(async () => {
  await Promise.all([a.stop('SIGTERM'), b.stop('SIGTERM')]);
  await sandboxd.stop();
  await database.drop();
});

it('kill -9 of the owner mid-turn: another replica owns it within 5 s; the log is whole and a viewer there sees every byte once', async () => {
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
  // The viewer is on B from the start: it reads what A writes, then what B writes.
  const viewer = await openSse(`${urlB}/api/conversations/${id}/stream?streams=stdout`, user.auth);
  await until('output to be persisted', async () =>
    (await storedStdout(id)).includes('line 40\n') ? true : undefined,
  );
  const epoch = await epochOf(id);
  await a.stop('SIGKILL');
  const killedAt = Date.now();
  assert.ok(!(await storedStdout(id)).includes(`line ${LINES}\n`), 'the turn was still running');
  await until(
    'B to own the conversation',
    async () => ((await epochOf(id)) > epoch ? true : undefined),
    30_000,
  );
  const takeoverMs = Date.now() - killedAt;
  assert.ok(takeoverMs < 5_000, `taken over after ${takeoverMs} ms`);

  const turn = await turnEnded(urlB, id, 1);
  assert.equal(turn.status, 'succeeded');
  const expected = Array.from({ length: LINES }, (_, i) => `line ${i + 1}\n`).join('');
  assert.equal(await storedStdout(id), expected);
  await until('the viewer to have every line', async () => {
    const seen = viewer.messages
      .filter((m) => m.event === 'stdout')
      .map((m) => (JSON.parse(m.data ?? '{}') as { text: string }).text)
      .join('');
    return seen.length >= expected.length ? seen : undefined;
  }).then((seen) => assert.equal(seen, expected));
  viewer.close();
  urlA = await a.start();
});

it('a prompt to a conversation whose owner died mid-turn takes it over at once (busy until the turn ends)', async () => {
  // C looks for orphans only every 10 minutes: only the prompt can make it take one over.
  const c = scriptedServerProcess(() => ({ ...envA, PORT: envC }), 30_000, {
    tickMs: DEFAULT_TICK_MS,
    orphanProbeMs: 600_000,
  });
  await a.stop('SIGTERM');
  const urlC = await c.start();
  try {
    const agent = await api(urlB, 'POST', '/api/agents', {
      name: 'slow',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    const started = await api(urlB, 'POST', '/api/conversations', {
      agent_id: agent.body['id'],
      prompt: 'echo begin; sleep 4; echo end',
    });
    assert.equal(started.status, 201);
    const id = started.body['id'] as string;
    await until('the turn running', async () =>
      (await storedStdout(id)).includes('begin') ? true : undefined,
    );
    const epoch = await epochOf(id);
    await b.stop('SIGKILL');
    const sentAt = Date.now();
    const busy = await api(urlC, 'POST', `/api/conversations/${id}/prompts`, { prompt: 'echo next' });
    assert.equal(busy.status, 409, JSON.stringify(busy.body));
    await until(
      'C to own the conversation',
      async () => ((await epochOf(id)) > epoch ? true : undefined),
      30_000,
    );
    const adoptedMs = Date.now() - sentAt;
    assert.ok(adoptedMs < 5_000, `taken over ${adoptedMs} ms after the prompt`);
    const turn = await turnEnded(urlC, id, 1);
    assert.equal(turn.status, 'succeeded');
    assert.match(await storedStdout(id), /begin\nend\n/);
  } finally {
    await c.stop('SIGTERM');
  }
});
