import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, beforeEach, describe, it } from 'node:test';
import {
  createSandboxClient,
  SandboxApiError,
  type SandboxClient,
  SandboxOperationError,
  SandboxProtocolError,
  SandboxTimeoutError,
  SandboxTransportError,
} from '../src/index.ts';
import { exitFrame4, type FakeBackend, frame, sendJson, startFakeBackend } from './fake-backend.ts';

const token = 'secret-token-0123456789';

describe('sandbox client against a loopback backend', () => {
  let backend: FakeBackend;
  let client: SandboxClient;

  before(async () => {
    backend = await startFakeBackend();
  });
  after(async () => {
    await backend.close();
  });
  beforeEach(() => {
    backend.requests.length = 0;
    backend.upgrade = undefined;
    client = createSandboxClient({
      baseUrl: backend.url,
      token,
      timeoutMs: 2_000,
      upgradeTimeoutMs: 2_000,
      retryPolicy: { baseDelayMs: 10, maxDelayMs: 1_000 },
    });
  });

  const restRequests = () => backend.requests.filter((request) => request.headers.upgrade === undefined);

  describe('create', () => {
    it('creates a sandbox with a JSON {name} body and the bearer token', async () => {
      backend.rest = (_request, response) => sendJson(response, 201, { name: 'sb-1', status: 'running' });
      const result = await client.create('sb-1');
      assert.deepEqual(result, { sandbox: { name: 'sb-1', status: 'running' }, adopted: false });
      const [request] = backend.requests;
      assert.equal(request?.method, 'POST');
      assert.equal(request?.url.pathname, '/v1/sandboxes');
      assert.deepEqual(JSON.parse(request?.body.toString() ?? ''), { name: 'sb-1' });
      assert.equal(request?.headers.authorization, `Bearer ${token}`);
    });

    it('adopts the sandbox when create answers 409', async () => {
      backend.rest = (request, response) => {
        if (request.method === 'POST') sendJson(response, 409, { error: 'already_exists' });
        else sendJson(response, 200, { name: 'sb-1', status: 'running' });
      };
      const result = await client.create('sb-1');
      assert.deepEqual(result, { sandbox: { name: 'sb-1', status: 'running' }, adopted: true });
      assert.deepEqual(
        backend.requests.map((request) => `${request.method} ${request.url.pathname}`),
        ['POST /v1/sandboxes', 'GET /v1/sandboxes/sb-1'],
      );
    });

    it('adopts the sandbox when create answers 400 saying the name already exists', async () => {
      backend.rest = (request, response) => {
        if (request.method === 'POST')
          sendJson(response, 400, { error: "sprite with name 'sb-1' already exists" });
        else sendJson(response, 200, { name: 'sb-1' });
      };
      const result = await client.create('sb-1');
      assert.equal(result.adopted, true);
    });

    it('fails fast on another 400, with status, decoded body and code, without retrying', async () => {
      backend.rest = (_request, response) =>
        sendJson(response, 400, { error: 'invalid_name', message: 'name must be lowercase' });
      const error = await client.create('SB').catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError);
      assert.equal(error.status, 400);
      assert.equal(error.code, 'invalid_name');
      assert.deepEqual(error.body, { error: 'invalid_name', message: 'name must be lowercase' });
      assert.match(error.message, /name must be lowercase/);
      assert.equal(backend.requests.length, 1);
    });

    it('retries a 503 and succeeds on the third attempt', async () => {
      let attempts = 0;
      backend.rest = (_request, response) => {
        attempts++;
        if (attempts < 3) sendJson(response, 503, { error: 'unavailable' });
        else sendJson(response, 201, { name: 'sb-1' });
      };
      const result = await client.create('sb-1');
      assert.equal(result.adopted, false);
      assert.equal(attempts, 3);
    });

    it('gives up after 3 attempts in all', async () => {
      backend.rest = (_request, response) => sendJson(response, 502, { error: 'bad_gateway' });
      const error = await client.create('sb-1').catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError);
      assert.equal(error.status, 502);
      assert.equal(backend.requests.length, 3);
    });

    it('honours retry_after_seconds of a 429 body', async () => {
      const times: number[] = [];
      backend.rest = (_request, response) => {
        times.push(performance.now());
        if (times.length === 1) {
          sendJson(response, 429, { error: 'sandbox_creation_rate_limited', retry_after_seconds: 0.3 });
        } else sendJson(response, 201, { name: 'sb-1' });
      };
      await client.create('sb-1');
      assert.equal(times.length, 2);
      assert.ok((times[1] ?? 0) - (times[0] ?? 0) >= 290, `waited ${(times[1] ?? 0) - (times[0] ?? 0)} ms`);
    });

    it('honours a Retry-After header of a 429', async () => {
      const times: number[] = [];
      backend.rest = (_request, response) => {
        times.push(performance.now());
        if (times.length === 1) {
          sendJson(response, 429, { error: 'concurrent_sandbox_limit_exceeded' }, { 'retry-after': '1' });
        } else sendJson(response, 201, { name: 'sb-1' });
      };
      await client.create('sb-1');
      assert.ok((times[1] ?? 0) - (times[0] ?? 0) >= 990);
    });

    it('does not retry when the caller opts out', async () => {
      backend.rest = (_request, response) => sendJson(response, 503, {});
      await assert.rejects(client.create('sb-1', { retry: false }), SandboxApiError);
      assert.equal(backend.requests.length, 1);
    });

    it('retries a timed-out create, then adopts the sandbox the first attempt made', async () => {
      const slow = createSandboxClient({
        baseUrl: backend.url,
        token,
        createTimeoutMs: 150,
        retryPolicy: { baseDelayMs: 10 },
      });
      backend.rest = (request, response) => {
        if (request.method === 'GET') sendJson(response, 200, { name: 'sb-1' });
        else if (restRequests().length === 1)
          setTimeout(() => sendJson(response, 201, { name: 'sb-1' }), 400);
        else sendJson(response, 409, { error: 'exists' });
      };
      const result = await slow.create('sb-1');
      assert.equal(result.adopted, true);
    });

    it('retries a transport error (connection refused) 3 times', async () => {
      const refused = createSandboxClient({
        baseUrl: 'http://127.0.0.1:1',
        token,
        retryPolicy: { baseDelayMs: 1 },
        logger: { warn: (fields) => warnings.push(fields) },
      });
      const warnings: Record<string, unknown>[] = [];
      const error = await refused.create('sb-1').catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxTransportError);
      assert.equal(warnings.length, 2);
      assert.doesNotMatch(error.message, new RegExp(token));
    });
  });

  describe('get, destroy, list', () => {
    it('get answers null on 404', async () => {
      backend.rest = (_request, response) => sendJson(response, 404, { error: 'not_found' });
      assert.equal(await client.get('missing'), null);
    });

    it('get retries only when asked, and never a 400', async () => {
      backend.rest = (_request, response) => sendJson(response, 400, { error: 'bad' });
      await assert.rejects(client.get('x', { retry: true }), SandboxApiError);
      assert.equal(backend.requests.length, 1);
      backend.rest = (_request, response) => sendJson(response, 500, { error: 'boom' });
      await assert.rejects(client.get('x'), SandboxApiError);
      assert.equal(backend.requests.length, 2);
      await assert.rejects(client.get('x', { retry: true }), SandboxApiError);
      assert.equal(backend.requests.length, 5);
    });

    it('destroy counts 404 as success', async () => {
      backend.rest = (_request, response) => sendJson(response, 404, { error: 'not_found' });
      await client.destroy('gone');
      assert.equal(backend.requests[0]?.method, 'DELETE');
      assert.equal(backend.requests[0]?.url.pathname, '/v1/sandboxes/gone');
    });

    it('destroy surfaces a 500 with its decoded text body', async () => {
      backend.rest = (_request, response) => response.writeHead(500).end('disk on fire');
      const error = await client.destroy('sb').catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError);
      assert.equal(error.status, 500);
      assert.equal(error.body, 'disk on fire');
    });

    const pages = [
      { sandboxes: [{ name: 'a' }, { name: 'b' }], has_more: true, next_continuation_token: 't1' },
      { sandboxes: [{ name: 'c' }], has_more: true, next_continuation_token: 't2' },
      { sandboxes: [{ name: 'd' }], has_more: false, next_continuation_token: null },
    ];
    const pageOf = (url: URL) => ({ t1: 1, t2: 2 })[url.searchParams.get('continuation_token') ?? ''] ?? 0;

    it('list follows continuation_token until has_more is false', async () => {
      backend.rest = (request, response) => sendJson(response, 200, pages[pageOf(request.url)]);
      const all = await client.list();
      assert.deepEqual(
        all.map((sandbox) => sandbox.name),
        ['a', 'b', 'c', 'd'],
      );
      assert.deepEqual(
        backend.requests.map((request) => request.url.searchParams.get('continuation_token')),
        [null, 't1', 't2'],
      );
    });

    it('list fails, never returns a partial result, when a middle page fails', async () => {
      backend.rest = (request, response) => {
        const page = pageOf(request.url);
        if (page === 1) sendJson(response, 500, { error: 'page_lost' });
        else sendJson(response, 200, pages[page]);
      };
      const error = await client.list().catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError);
      assert.equal(error.status, 500);
    });

    it('list fails on a page token that loops', async () => {
      backend.rest = (_request, response) =>
        sendJson(response, 200, {
          sandboxes: [{ name: 'a' }],
          has_more: true,
          next_continuation_token: 'same',
        });
      await assert.rejects(client.list(), SandboxProtocolError);
    });
  });

  describe('REST timeouts and auth', () => {
    it('fails a REST call that outlives timeoutMs', async () => {
      const quick = createSandboxClient({ baseUrl: backend.url, token, timeoutMs: 200 });
      backend.rest = (_request, response) => {
        setTimeout(() => sendJson(response, 200, { name: 'late' }), 1_000);
      };
      const started = performance.now();
      const error = await quick.get('late').catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxTimeoutError);
      assert.ok(performance.now() - started < 900);
    });

    it('sends the bearer token on every REST call and never puts it in an error message', async () => {
      backend.rest = (_request, response) =>
        sendJson(response, 401, { error: 'unauthorized', message: 'bad token' });
      const errors = await Promise.all([
        client.get('a').catch((caught: unknown) => caught),
        client.destroy('a').catch((caught: unknown) => caught),
        client.list().catch((caught: unknown) => caught),
        client.listSessions('a').catch((caught: unknown) => caught),
        client.setNetworkPolicy('a', { rules: [] }).catch((caught: unknown) => caught),
      ]);
      for (const request of backend.requests) assert.equal(request.headers.authorization, `Bearer ${token}`);
      for (const error of errors) {
        assert.ok(error instanceof SandboxApiError);
        assert.equal(error.status, 401);
        assert.doesNotMatch(error.message, new RegExp(token));
      }
    });
  });

  describe('write file', () => {
    it('PUTs the raw body with path, workingDir, octal mode and mkdirParents', async () => {
      backend.rest = (_request, response) => sendJson(response, 200, { path: '/a/b', size: 3 });
      await client.writeFile('sb', '/a/b/c.sh', Buffer.from([0, 1, 255]), {
        mode: 0o755,
        mkdirParents: true,
      });
      const [request] = backend.requests;
      assert.equal(request?.method, 'PUT');
      assert.equal(request?.url.pathname, '/v1/sandboxes/sb/fs/write');
      assert.equal(request?.url.searchParams.get('path'), '/a/b/c.sh');
      assert.equal(request?.url.searchParams.get('workingDir'), '/');
      assert.equal(request?.url.searchParams.get('mode'), '0755');
      assert.equal(request?.url.searchParams.get('mkdirParents'), 'true');
      assert.deepEqual(request?.body, Buffer.from([0, 1, 255]));
    });
  });

  describe('checkpoints', () => {
    const ndjson = (lines: unknown[]) => `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;

    it('surfaces the checkpoint id from an id field', async () => {
      backend.rest = (_request, response) => {
        response.writeHead(200, { 'content-type': 'application/x-ndjson' });
        response.write(ndjson([{ type: 'info', data: 'copying' }]));
        setTimeout(() => response.end(ndjson([{ type: 'complete', data: 'done', id: 'cp-42' }])), 20);
      };
      const seen: string[] = [];
      const result = await client.createCheckpoint('sb', { onEvent: (event) => seen.push(event.type) });
      assert.equal(result.id, 'cp-42');
      assert.deepEqual(seen, ['info', 'complete']);
      assert.equal(backend.requests[0]?.url.pathname, '/v1/sandboxes/sb/checkpoint');
    });

    it("surfaces the checkpoint id from the reference backend's completion text", async () => {
      backend.rest = (_request, response) => {
        response.writeHead(200, { 'content-type': 'application/x-ndjson' });
        response.end(
          ndjson([
            { type: 'info', data: 'Creating checkpoint...' },
            { type: 'complete', data: 'Checkpoint v3 created successfully' },
          ]).trimEnd(),
        );
      };
      assert.equal((await client.createCheckpoint('sb')).id, 'v3');
    });

    it('fails a checkpoint whose stream names no id', async () => {
      backend.rest = (_request, response) =>
        response.writeHead(200).end(ndjson([{ type: 'info', data: 'ok' }]));
      await assert.rejects(client.createCheckpoint('sb'), SandboxProtocolError);
    });

    it('restores through the checkpoints/{id}/restore path', async () => {
      backend.rest = (_request, response) =>
        response.writeHead(200).end(ndjson([{ type: 'info', data: 'restoring' }, { type: 'complete' }]));
      const result = await client.restoreCheckpoint('sb', 'cp-42');
      assert.equal(result.events.length, 2);
      assert.equal(backend.requests[0]?.url.pathname, '/v1/sandboxes/sb/checkpoints/cp-42/restore');
    });

    it('fails a restore whose 200 stream carries an error line', async () => {
      backend.rest = (_request, response) =>
        response.writeHead(200).end(
          ndjson([
            { type: 'info', data: 'restoring' },
            { type: 'error', error: 'checkpoint corrupt' },
          ]),
        );
      const error = await client.restoreCheckpoint('sb', 'cp-1').catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxOperationError);
      assert.match(error.message, /checkpoint corrupt/);
      assert.deepEqual(error.event, { type: 'error', error: 'checkpoint corrupt' });
    });

    it('fails a restore whose stream breaks off', async () => {
      backend.rest = (_request, response) => {
        response.writeHead(200);
        response.write(ndjson([{ type: 'info', data: 'restoring' }]));
        setTimeout(() => response.socket?.destroy(), 20);
      };
      await assert.rejects(client.restoreCheckpoint('sb', 'cp-1'), SandboxTransportError);
    });

    it('deletes through DELETE checkpoints/{id}; a 404 counts as deleted, a 409 fails', async () => {
      let status = 204;
      backend.rest = (_request, response) =>
        response
          .writeHead(status, { 'content-type': 'application/json' })
          .end(status === 204 ? '' : '{"error":"x"}');
      await client.deleteCheckpoint('sb', 'cp/42');
      assert.equal(backend.requests[0]?.method, 'DELETE');
      assert.equal(backend.requests[0]?.url.pathname, '/v1/sandboxes/sb/checkpoints/cp%2F42');
      status = 404;
      await client.deleteCheckpoint('sb', 'cp-42');
      status = 409;
      await assert.rejects(client.deleteCheckpoint('sb', 'cp-42'), SandboxApiError);
    });
  });

  describe('network policy', () => {
    for (const status of [204, 200]) {
      it(`accepts ${status}`, async () => {
        backend.rest = (_request, response) => response.writeHead(status).end();
        await client.setNetworkPolicy('sb', { rules: [{ domain: '*', action: 'deny' }] });
        const [request] = backend.requests;
        assert.equal(request?.url.pathname, '/v1/sandboxes/sb/policy/network');
        assert.deepEqual(JSON.parse(request?.body.toString() ?? ''), {
          rules: [{ domain: '*', action: 'deny' }],
        });
      });
    }

    it('rejects another 2xx and a 4xx', async () => {
      backend.rest = (_request, response) => response.writeHead(202).end();
      await assert.rejects(client.setNetworkPolicy('sb', { rules: [] }), SandboxProtocolError);
      backend.rest = (_request, response) => sendJson(response, 422, { error: 'bad_rule' });
      await assert.rejects(client.setNetworkPolicy('sb', { rules: [] }), SandboxApiError);
    });
  });

  describe('exec', () => {
    it('sends the argv, env, dir and stdin flag as query parameters with the bearer token on the upgrade', async () => {
      backend.exec = (socket) => socket.send(exitFrame4(0));
      await client.exec('sb', { cmd: ['sh', '-c', 'echo $A'], env: { A: 'x=1' }, dir: '/work' });
      const [request] = backend.requests;
      assert.equal(request?.url.pathname, '/v1/sandboxes/sb/exec');
      assert.deepEqual(request?.url.searchParams.getAll('cmd'), ['sh', '-c', 'echo $A']);
      assert.deepEqual(request?.url.searchParams.getAll('env'), ['A=x=1']);
      assert.equal(request?.url.searchParams.get('dir'), '/work');
      assert.equal(request?.url.searchParams.get('stdin'), 'false');
      assert.equal(request?.headers.authorization, `Bearer ${token}`);
    });

    it('reads a 4-byte big-endian exit code and splits stdout from stderr', async () => {
      backend.exec = (socket) => {
        socket.send(frame(1, 'out-1 '));
        socket.send(frame(2, 'err'));
        socket.send(frame(1, 'out-2'));
        socket.send(exitFrame4(300));
      };
      const result = await client.exec('sb', { cmd: ['x'] });
      assert.equal(result.exitCode, 300);
      assert.equal(result.stdout.toString(), 'out-1 out-2');
      assert.equal(result.stderr.toString(), 'err');
    });

    it('reads a 1-byte exit code', async () => {
      backend.exec = (socket) => socket.send(frame(3, Buffer.from([7])));
      assert.equal((await client.exec('sb', { cmd: ['x'] })).exitCode, 7);
    });

    it('treats a close without an exit frame as exit 0', async () => {
      backend.exec = (socket) => {
        socket.send(frame(1, 'bye'));
        socket.close();
      };
      const result = await client.exec('sb', { cmd: ['x'] });
      assert.equal(result.exitCode, 0);
      assert.equal(result.stdout.toString(), 'bye');
    });

    it('sends stdin frames then stdin EOF', async () => {
      backend.exec = (socket) => {
        const received: Buffer[] = [];
        socket.on('message', (data) => {
          const message = data as Buffer;
          if (message[0] === 0) received.push(message.subarray(1));
          if (message[0] === 4) {
            socket.send(frame(1, Buffer.concat(received)));
            socket.send(exitFrame4(0));
          }
        });
      };
      const result = await client.exec('sb', { cmd: ['cat'], stdin: Readable.from(['one ', 'two']) });
      assert.equal(result.stdout.toString(), 'one two');
      assert.equal(backend.requests[0]?.url.searchParams.get('stdin'), 'true');
    });

    it('bounds the captured output and flags the truncation', async () => {
      backend.exec = (socket) => {
        socket.send(frame(1, 'abcdef'));
        socket.send(frame(1, 'ghij'));
        socket.send(exitFrame4(0));
      };
      const result = await client.exec('sb', { cmd: ['x'], maxOutputBytes: 8 });
      assert.equal(result.stdout.toString(), 'abcdefgh');
      assert.equal(result.stdoutTruncated, true);
      assert.equal(result.stderrTruncated, false);
    });

    it('fails with a timeout when the command outlives its client-side deadline', async () => {
      let closed = false;
      backend.exec = (socket) => socket.on('close', () => (closed = true));
      const error = await client
        .exec('sb', { cmd: ['sleep', '60'], timeoutMs: 150 })
        .catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxTimeoutError);
      await waitFor(() => closed);
    });

    it('fails when the upgrade does not complete in time', async () => {
      const quick = createSandboxClient({ baseUrl: backend.url, token, upgradeTimeoutMs: 200 });
      backend.upgrade = () => {
        // Never answer the upgrade request.
      };
      const started = performance.now();
      const error = await quick.exec('sb', { cmd: ['true'] }).catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxTimeoutError);
      assert.ok(performance.now() - started < 1_500);
      assert.equal(backend.requests[0]?.headers.authorization, `Bearer ${token}`);
    });

    it('surfaces a refused upgrade as status plus decoded body', async () => {
      backend.upgrade = (_request, socket) => {
        const body = JSON.stringify({ error: 'not_found', message: 'no such sandbox' });
        socket.end(
          `HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
        );
      };
      const error = await client.exec('nope', { cmd: ['true'] }).catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError);
      assert.equal(error.status, 404);
      assert.equal(error.code, 'not_found');
      assert.doesNotMatch(error.message, new RegExp(token));
    });

    it('retries a refused upgrade (503) on the provisioning path only when asked', async () => {
      let upgrades = 0;
      backend.upgrade = (_request, socket) => {
        upgrades++;
        socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n');
      };
      await assert.rejects(client.exec('sb', { cmd: ['true'] }), SandboxApiError);
      assert.equal(upgrades, 1);
      await assert.rejects(client.exec('sb', { cmd: ['true'], retry: true }), SandboxApiError);
      assert.equal(upgrades, 4);
    });

    it('does not retry a command whose upgrade reached the backend unanswered (it may have started)', async () => {
      let upgrades = 0;
      backend.upgrade = (_request, socket) => {
        upgrades++;
        socket.destroy(); // read, then the connection drops: the backend may have started the command
      };
      const error = await client
        .exec('sb', { cmd: ['true'], retry: true })
        .catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxTransportError, String(error));
      assert.equal(upgrades, 1);
      const quick = createSandboxClient({
        baseUrl: backend.url,
        token,
        upgradeTimeoutMs: 200,
        retryPolicy: { baseDelayMs: 10 },
      });
      backend.upgrade = () => {
        upgrades++; // never answered
      };
      const late = await quick
        .execStream('sb', { cmd: ['true'], retry: true })
        .catch((caught: unknown) => caught);
      assert.ok(late instanceof SandboxTimeoutError, String(late));
      assert.equal(upgrades, 2, 'a timed-out upgrade is not tried again either');
    });

    it('retries an attach whose upgrade dropped (attaching twice starts nothing)', async () => {
      let upgrades = 0;
      backend.upgrade = (_request, socket) => {
        upgrades++;
        socket.destroy();
      };
      await assert.rejects(client.attach('sb', '7', { retry: true }), SandboxTransportError);
      assert.equal(upgrades, 3);
    });

    it('retries a command whose connection never opened (nothing reached the backend)', async () => {
      const closed = await startFakeBackend();
      const url = closed.url;
      await closed.close();
      const attempts: number[] = [];
      const logger = {
        warn: (fields: Record<string, unknown>, message: string) => {
          if (message === 'sandbox call failed, retrying') attempts.push(Number(fields['attempt']));
        },
      };
      const logged = createSandboxClient({ baseUrl: url, token, retryPolicy: { baseDelayMs: 10 }, logger });
      await assert.rejects(logged.exec('sb', { cmd: ['true'], retry: true }), SandboxTransportError);
      assert.deepEqual(attempts, [1, 2], 'refused connections were retried: 3 attempts');
    });
  });

  describe('exec streaming, TTY and attach', () => {
    it('streams output of a detachable command and names its session', async () => {
      backend.exec = (socket) => {
        socket.send(JSON.stringify({ type: 'session_info', session_id: 1847, tty: false }));
        socket.send(frame(1, 'tick'));
        setTimeout(() => socket.send(exitFrame4(3)), 20);
      };
      const chunks: string[] = [];
      const handle = await client.execStream('sb', {
        cmd: ['agent'],
        detachable: true,
        onStdout: (chunk) => chunks.push(chunk.toString()),
      });
      assert.equal(await handle.exited, 3);
      assert.equal(handle.sessionId, '1847');
      assert.deepEqual(chunks, ['tick']);
      assert.equal(backend.requests[0]?.url.searchParams.get('detachable'), 'true');
    });

    it('in TTY mode passes raw bytes both ways, sends resize as JSON and reads the exit control message', async () => {
      const fromClient: unknown[] = [];
      backend.exec = (socket) => {
        socket.on('message', (data, isBinary) => {
          fromClient.push(isBinary ? (data as Buffer).toString() : JSON.parse(String(data)));
          if (isBinary) {
            socket.send(Buffer.concat([Buffer.from([1]), data as Buffer]));
            socket.send(JSON.stringify({ type: 'exit', exit_code: 5 }));
          }
        });
      };
      const output: Buffer[] = [];
      const handle = await client.execStream('sb', {
        cmd: ['bash'],
        tty: true,
        rows: 30,
        cols: 100,
        onStdout: (chunk) => output.push(chunk),
      });
      handle.resize(120, 40);
      await handle.write('ls\r');
      assert.equal(await handle.exited, 5);
      assert.deepEqual(fromClient, [{ type: 'resize', cols: 120, rows: 40 }, 'ls\r']);
      // In TTY mode a leading 0x01 is terminal data, not a stream id.
      assert.deepEqual(Buffer.concat(output), Buffer.from('\x01ls\r'));
      const query = backend.requests[0]?.url.searchParams;
      assert.equal(query?.get('tty'), 'true');
      assert.equal(query?.get('rows'), '30');
      assert.equal(query?.get('cols'), '100');
      assert.equal(query?.get('stdin'), 'true');
    });

    it('attaches to a session by id', async () => {
      backend.exec = (socket) => {
        socket.send(frame(1, 'replayed '));
        socket.send(frame(1, 'tail'));
        socket.close();
      };
      const output: string[] = [];
      const handle = await client.attach('sb', '1847', {
        onStdout: (chunk) => output.push(chunk.toString()),
      });
      assert.equal(await handle.exited, 0);
      assert.equal(output.join(''), 'replayed tail');
      assert.equal(backend.requests[0]?.url.pathname, '/v1/sandboxes/sb/exec/1847');
    });

    it('lists sessions', async () => {
      backend.rest = (_request, response) =>
        sendJson(response, 200, {
          sessions: [
            { id: 12, command: 'agent', created: 1, last_activity: 2, is_active: false, tty: false },
          ],
        });
      const sessions = await client.listSessions('sb');
      assert.equal(sessions[0]?.id, '12');
      assert.equal(sessions[0]?.is_active, false);
      assert.equal(backend.requests[0]?.url.pathname, '/v1/sandboxes/sb/exec');
    });
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
