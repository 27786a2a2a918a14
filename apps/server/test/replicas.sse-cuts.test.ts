// Issue 39, deliverable 3: a viewer's stream survives being cut and resumed on another replica.
// Two replicas (the real `serve` boot with the scripted runtime, each its own process) on one
// PostgreSQL and one sandboxd; a turn prints numbered lines for many seconds; an SSE client is
// cut 20 times mid-stream (its socket destroyed at a random moment, often inside a frame) and
// reconnects each time to the other replica with `Last-Event-ID` = the id of the last whole
// event it got (the spec: the stream is resumable through Last-Event-ID, strictly after it).
// Every stored event reaches it exactly once, in order, and the stdout it read equals the
// program's output byte for byte.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from '../../sandboxd/test/harness.ts';
import { DEFAULT_TICK_MS } from '../src/conversations/engine/lifecycle.ts';
import { freePort } from '../src/db/embedded.ts';
import { logRows } from './helpers/conversation-rows.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { scriptedServerProcess } from './helpers/scripted-server.ts';
import { openSse, type SseMessage } from './helpers/sse-client.ts';

const LINES = 1500;
const CUTS = 20;

let sandboxd: TestSandboxd;
let database: TestDatabase;
let user: TestUser;
let envs: NodeJS.ProcessEnv[] = [];
const replicas = [0, 1].map((i) =>
  scriptedServerProcess(() => envs[i] ?? {}, 60_000, { tickMs: DEFAULT_TICK_MS }),
);
let urls: string[] = [];

async function api(url: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { ...user.auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
  envs = [
    { ...common, PORT: String(await freePort()) },
    { ...common, PORT: String(await freePort()) },
  ];
  urls = await Promise.all(replicas.map((r) => r.start()));
});

after(async () => {
  await Promise.all(replicas.map((r) => r.stop('SIGTERM')));
  await sandboxd.stop();
  await database.drop();
});

it('an SSE client cut 20 times mid-stream, resuming alternately on A and B, gets every event once, in order', async (t) => {
  const agent = await api(urls[0]!, 'POST', '/api/agents', {
    name: 'numbered',
    model: 'anthropic/claude-sonnet-4-5',
    runtime: 'claude',
  });
  assert.equal(agent.status, 201);
  const script = `i=1; while [ $i -le ${LINES} ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done`;
  const started = await api(urls[0]!, 'POST', '/api/conversations', {
    agent_id: agent.body['id'],
    prompt: script,
  });
  assert.equal(started.status, 201);
  const id = started.body['id'] as string;
  const expected = Array.from({ length: LINES }, (_, i) => `line ${i + 1}\n`).join('');

  /** Every whole event the client got, over all its connections, in the order it got them. */
  const got: SseMessage[] = [];
  let lastId: string | undefined;
  /** How many cuts came while the turn was still printing (the last line not yet received). */
  let cutsWhileRunning = 0;
  const connect = async (n: number, query = '') => {
    const url = `${urls[n % 2]}/api/conversations/${id}/stream${query}`;
    const stream = await openSse(url, { ...user.auth, ...(lastId ? { 'last-event-id': lastId } : {}) });
    assert.equal(stream.status, 200);
    return stream;
  };
  const take = (messages: SseMessage[]) => {
    for (const m of messages) {
      if (m.event === 'comment' || m.id === undefined) continue;
      got.push(m);
      lastId = m.id;
    }
  };

  let cutsInsideFrame = 0;
  for (let cut = 0; cut < CUTS; cut++) {
    const stream = await connect(cut);
    // At least one new event on this connection, then a cut at a random moment after it: the
    // socket is destroyed wherever the bytes are. The client then keeps only the bytes up to a
    // random offset past its first event, as if the connection had broken there, inside a frame
    // every other time: a partial frame is not an event, and the next connection resumes after
    // the last whole one.
    await stream.next((m) => m.id !== undefined, 60_000);
    await sleep(Math.random() * 150);
    stream.close();
    await stream.ended;
    const raw = stream.raw();
    const firstEnd = endOfFirstEvent(raw);
    let at = firstEnd + Math.floor(Math.random() * (raw.length - firstEnd + 1));
    if (cut % 2 === 0) {
      // Inside the frame that `at` falls in (or the last one): not at a frame's end.
      const frameEnd = raw.indexOf('\n\n', Math.max(at, firstEnd));
      if (frameEnd > firstEnd) at = Math.max(firstEnd, frameEnd - 1 - Math.floor(Math.random() * 5));
    }
    const kept = raw.slice(0, at);
    if (!kept.endsWith('\n\n')) cutsInsideFrame++;
    take(parseFrames(kept));
    if (!stdoutOf(got).includes(`line ${LINES}\n`)) cutsWhileRunning++;
  }

  const turn = await until('the turn to end', async () => {
    const res = await api(urls[1]!, 'GET', `/api/conversations/${id}/turns`);
    const turns = res.body['data'] as { status: string }[];
    return turns[0] && !['queued', 'running'].includes(turns[0].status) ? turns[0] : undefined;
  });
  assert.equal(turn.status, 'succeeded');
  // The rest, once everything is stored: wait=false sends what exists after the cursor, then `end`.
  const rest = await connect(CUTS, '?wait=false');
  await rest.ended;
  assert.equal(rest.messages.at(-1)?.event, 'end');
  take(rest.messages.filter((m) => m.event !== 'end'));

  t.diagnostic(
    `${cutsWhileRunning} cuts while the turn ran, ${cutsInsideFrame} inside a frame, ${got.length} events`,
  );
  assert.ok(cutsWhileRunning >= CUTS / 2, `only ${cutsWhileRunning} cuts came while the turn ran`);
  assert.ok(cutsInsideFrame >= CUTS / 2, `only ${cutsInsideFrame} cuts fell inside a frame`);
  // Exactly once, in order: the ids the client got are the stored rows' ids of its streams
  // (the default: stdout, stderr, stage), each once, increasing.
  const stored = (await logRows(database.handle.db, id)).filter((r) =>
    ['stdout', 'stderr', 'stage'].includes(r.stream),
  );
  assert.deepEqual(
    got.map((m) => m.id),
    stored.map((r) => r.id),
  );
  assert.deepEqual(
    got.map((m) => m.event),
    stored.map((r) => r.stream),
  );
  assert.equal(stdoutOf(got), expected);
});

/** The offset just past the first frame that carries an event id. */
function endOfFirstEvent(raw: string): number {
  for (let pos = 0; ; ) {
    const end = raw.indexOf('\n\n', pos);
    assert.ok(end >= 0, 'the connection got an event');
    if (/(^|\n)id: /.test(raw.slice(pos, end))) return end + 2;
    pos = end + 2;
  }
}

/** The whole frames of an SSE text, as a client parses them (a trailing partial frame is dropped). */
function parseFrames(text: string): SseMessage[] {
  const blocks = text.split('\n\n').slice(0, -1);
  const out: SseMessage[] = [];
  for (const block of blocks) {
    const message: SseMessage = { event: 'message', at: 0 };
    let fields = 0;
    for (const line of block.split('\n')) {
      if (line.startsWith(':') || line === '') continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') message.event = value;
      else if (field === 'id') message.id = value;
      else if (field === 'data')
        message.data = message.data === undefined ? value : `${message.data}\n${value}`;
      else continue;
      fields++;
    }
    if (fields > 0) out.push(message);
  }
  return out;
}

function stdoutOf(messages: SseMessage[]): string {
  return messages
    .filter((m) => m.event === 'stdout')
    .map((m) => (JSON.parse(m.data ?? '{}') as { text: string }).text)
    .join('');
}
