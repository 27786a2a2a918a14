// The SSE follower against recorded stream text replayed on a loopback port, where each
// connection can be dropped, refused or left silent on purpose (the real server's stream is
// exercised end to end in conversations.test.ts; here the network faults are the subject).
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createClient } from '../src/client.ts';
import { ApiError, CliError } from '../src/errors.ts';
import { type FollowOptions, follow } from '../src/follow.ts';
import type { LogEvent } from '../src/render.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let server: Server;
let url: string;
/** One handler per connection, in order; the last one repeats. */
let script: Handler[] = [];
let seen: IncomingMessage[] = [];

before(async () => {
  server = createServer((req, res) => {
    seen.push(req);
    const handler = script[Math.min(seen.length - 1, script.length - 1)];
    handler?.(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const at = '2026-11-24T05:00:00.000Z';
function sse(id: number, text: string): string {
  const e: LogEvent = { id: String(id), stream: 'stdout', text, turn_id: 't1', created_at: at };
  return `id: ${id}\nevent: stdout\ndata: ${JSON.stringify(e)}\n\n`;
}
const open = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });
/** Replays events `from`..`to` of a numbered log (line N is "line N\n"). */
const replay = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => sse(from + i, `line ${from + i}\n`)).join('');

const FAST = { retryInitialMs: 10, retryMaxMs: 40, giveUpMs: 2000, deadAfterMs: 300, quietMs: 200 };

async function run(overrides: Partial<FollowOptions> = {}) {
  seen = [];
  const texts: string[] = [];
  const notices: string[] = [];
  const result = await follow({
    client: createClient({ url, apiKey: 'pdk_test' }),
    conversationId: 'c1',
    streams: null,
    wait: true,
    signal: new AbortController().signal,
    onEvent: (e) => {
      texts.push(e.text ?? '');
      return 'continue';
    },
    onNotice: (kind) => notices.push(kind),
    timing: FAST,
    ...overrides,
  });
  return { result, text: texts.join(''), notices, headers: seen.map((r) => r.headers) };
}

const numbered = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}\n`).join('');

describe('following the stream', () => {
  it('resumes after a dropped connection with Last-Event-ID: no event lost, none twice', async () => {
    script = [
      (_req, res) => {
        open(res);
        // events 1–3 whole, then half of event 4, then the connection dies
        res.write(replay(1, 3) + sse(4, 'line 4\n').slice(0, 20));
        setTimeout(() => res.destroy(), 20);
      },
      (req, res) => {
        open(res);
        const after = Number(req.headers['last-event-id']);
        res.end(`${replay(after + 1, 6)}event: end\ndata: {}\n\n`);
      },
    ];
    const { result, text, notices, headers } = await run({ wait: false });
    assert.equal(result.end, 'end');
    assert.equal(result.lastEventId, '6');
    assert.equal(text, numbered(1, 6));
    assert.equal(headers[0]?.['last-event-id'], undefined);
    assert.equal(headers[1]?.['last-event-id'], '3');
    assert.equal(headers[0]?.['x-paddock-client'], 'cli');
    assert.equal(headers[0]?.['authorization'], 'Bearer pdk_test');
    assert.deepEqual(notices, ['reconnecting', 'reconnected']);
    assert.ok(seen[0]?.url?.endsWith('/api/conversations/c1/stream?wait=false'));
  });

  it('tells the user when the owner is lost and keeps following until the stream resumes', async () => {
    script = [
      (_req, res) => {
        open(res);
        res.write(
          `${replay(1, 2)}event: owner_lost\ndata: {}\n\nevent: owner_lost\ndata: {}\n\n: heartbeat\n\n`,
        );
        setTimeout(() => res.end(), 30);
      },
      (req, res) => {
        open(res);
        assert.equal(req.headers['last-event-id'], '2');
        res.end(`${replay(3, 4)}event: end\ndata: {}\n\n`);
      },
    ];
    const { result, text, notices } = await run({ check: async () => 'continue' });
    assert.equal(result.end, 'end');
    assert.equal(text, numbered(1, 4));
    assert.deepEqual(
      notices.filter((n) => n === 'owner_lost'),
      ['owner_lost'],
      'told once, not at every heartbeat',
    );
  });

  it('retries a 503 and a 429 as Retry-After says, and reconnects a silent socket (no heartbeat)', async () => {
    script = [
      (_req, res) =>
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"unavailable"}'),
      (_req, res) =>
        res
          .writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' })
          .end('{"error":"rate_limited","message":"slow down"}'),
      (_req, res) => {
        open(res);
        res.write(replay(1, 1)); // then nothing at all: the follower must not wait forever
      },
      (req, res) => {
        open(res);
        assert.equal(req.headers['last-event-id'], '1');
        res.end(`${replay(2, 2)}event: end\ndata: {}\n\n`);
      },
    ];
    const { result, text } = await run();
    assert.equal(result.end, 'end');
    assert.equal(text, numbered(1, 2));
    assert.equal(seen.length, 4);
  });

  it('stops at a 404 or 401 at once: retrying cannot help', async () => {
    for (const [status, code] of [
      [404, 'not_found'],
      [401, 'unauthorized'],
    ] as const) {
      script = [
        (_req, res) =>
          res
            .writeHead(status, { 'content-type': 'application/json' })
            .end(JSON.stringify({ error: code, message: 'no' })),
      ];
      await assert.rejects(run(), (err: unknown) => err instanceof ApiError && err.status === status);
      assert.equal(seen.length, 1);
    }
  });

  it('gives up after giveUpMs without a working connection, naming how to re-attach', async () => {
    script = [(_req, res) => res.writeHead(502).end()];
    await assert.rejects(
      run({ timing: { ...FAST, giveUpMs: 150 } }),
      (err: unknown) => err instanceof CliError && /re-attach with: paddock logs c1 -f/.test(err.message),
    );
  });

  it('asks check() when the server closes a live stream, and stops when it says so', async () => {
    script = [
      (_req, res) => {
        open(res);
        res.end(replay(1, 2));
      },
    ];
    let checks = 0;
    const { result, text } = await run({
      check: async () => {
        checks++;
        return 'stop';
      },
    });
    assert.equal(result.end, 'stopped');
    assert.equal(text, numbered(1, 2));
    assert.equal(checks, 1);
    assert.equal(seen.length, 1);
  });

  it('asks check() when a live stream stays quiet, and stops when the turn ended meanwhile', async () => {
    script = [
      (_req, res) => {
        open(res);
        res.write(replay(1, 1));
        const beat = setInterval(() => res.write(': heartbeat\n\n'), 50);
        res.on('close', () => clearInterval(beat));
      },
    ];
    const { result } = await run({ check: async () => 'stop' });
    assert.equal(result.end, 'stopped');
  });

  it('ends at once on the abort signal (Ctrl-C), mid-stream or while waiting to reconnect', async () => {
    for (const handler of [
      (_req: IncomingMessage, res: ServerResponse) => {
        open(res);
        res.write(replay(1, 1));
      },
      (_req: IncomingMessage, res: ServerResponse) => res.writeHead(503).end(),
    ]) {
      script = [handler];
      const detach = new AbortController();
      const started = Date.now();
      setTimeout(() => detach.abort(), 100);
      const { result } = await run({
        signal: detach.signal,
        timing: { ...FAST, retryInitialMs: 60_000, retryMaxMs: 60_000, deadAfterMs: 60_000, quietMs: 60_000 },
      });
      assert.equal(result.end, 'detached');
      assert.ok(Date.now() - started < 5000);
      assert.equal(seen.length, 1, 'a 503 without Retry-After waits the backoff, not 0 s');
    }
  });

  it('starts after a given event id (the first request carries it as Last-Event-ID)', async () => {
    script = [
      (req, res) => {
        open(res);
        res.end(`${replay(Number(req.headers['last-event-id']) + 1, 12)}event: end\ndata: {}\n\n`);
      },
    ];
    const { text, headers } = await run({ wait: false, after: '9' });
    assert.equal(headers[0]?.['last-event-id'], '9', JSON.stringify(headers));
    assert.equal(text, numbered(10, 12));
  });

  it('stops when onEvent says so, and sends the streams filter', async () => {
    script = [
      (_req, res) => {
        open(res);
        res.write(replay(1, 5));
      },
    ];
    const { result, text } = await run({
      streams: ['stdout', 'stage'],
      onEvent: (e) => (e.id === '3' ? 'stop' : 'continue'),
    });
    assert.equal(result.end, 'stopped');
    assert.equal(result.lastEventId, '3');
    assert.equal(text, '');
    assert.ok(seen[0]?.url?.endsWith('/stream?streams=stdout%2Cstage'));
  });
});
