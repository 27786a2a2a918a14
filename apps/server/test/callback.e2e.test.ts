// The sandbox's callback into the service, end to end: the `npm start` layout (the server on
// 127.0.0.1, sandboxd beside it with SANDBOXD_SERVICE_ROUTES mapping paddock.internal to the
// server's port, SANDBOX_CALLBACK_URL=http://paddock.internal:<port>). A turn in the sandbox calls
// GET $PADDOCK_BASE_URL/api/auth/me with $PADDOCK_TOKEN through the real egress proxy; after
// terminate the key authenticates nothing. The route opens exactly that name and port: loopback
// stays refused otherwise.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { createSandboxClient } from '@paddock/sandbox-client';
import type { FastifyInstance } from 'fastify';
import { startTestSandboxd, type TestSandboxd } from '../../sandboxd/test/harness.ts';
import { parseConfig } from '../src/config/config.ts';
import { freePort } from '../src/db/embedded.ts';
import { createDeps, type Deps } from '../src/deps.ts';
import { buildApp } from '../src/http/app.ts';
import { createLogger } from '../src/observability/logger.ts';
import { createMetrics } from '../src/observability/metrics.ts';
import { VERSION } from '../src/version.ts';
import { scriptedRuntimes } from './fixtures/scripted-runtime.ts';
import { testEnv } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createVerifiedUser } from './helpers/factories.ts';

let sandboxd: TestSandboxd;
let database: TestDatabase;
let deps: Deps;
let app: FastifyInstance;
let url: string;
let port: number;
const logs: string[] = [];

before(async () => {
  port = await freePort();
  sandboxd = await startTestSandboxd({
    env: { SANDBOXD_SERVICE_ROUTES: `paddock.internal=127.0.0.1:${port}` },
  });
  database = await createTestDatabase();
  const { config } = parseConfig(
    testEnv({
      DATABASE_URL: database.url,
      DATABASE_SSL: 'false',
      SANDBOX_BASE_URL: sandboxd.url,
      SANDBOX_TOKEN: sandboxd.token,
      SANDBOX_CALLBACK_URL: `http://paddock.internal:${port}`,
    }),
  );
  deps = createDeps({
    version: VERSION,
    config,
    logger: createLogger({
      level: config.logLevel,
      destination: new Writable({
        write(chunk, _enc, cb) {
          logs.push(String(chunk));
          cb();
        },
      }),
    }),
    metrics: createMetrics(),
    database: database.handle,
    engine: { runtimes: scriptedRuntimes },
  });
  app = await buildApp(deps);
  await app.listen({ port, host: '127.0.0.1' });
  await deps.conversationEngine.start();
  url = `http://127.0.0.1:${port}`;
});

after(async () => {
  await deps?.conversationEngine.stop();
  await app?.close();
  await database?.drop();
  await sandboxd?.stop();
});

async function api(auth: Record<string, string>, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('sandbox callback', () => {
  test('a sandbox calls GET $PADDOCK_BASE_URL/api/auth/me with $PADDOCK_TOKEN through its proxy; terminate revokes the key', async () => {
    const user = await createVerifiedUser(deps.db);
    const agent = await api(user.auth, 'POST', '/api/agents', {
      name: 'callback-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    assert.equal(agent.status, 201);
    const script = [
      '. /home/sandbox/.paddock/env',
      'echo "base=$PADDOCK_BASE_URL service=$SERVICE_BASE_URL"',
      'curl -sS -w "\\nme=%{http_code}\\n" -H "Authorization: Bearer $PADDOCK_TOKEN" "$PADDOCK_BASE_URL/api/auth/me"',
      // The route opens that name and port only: another port of the name, and loopback itself, stay refused.
      `curl -s -o /dev/null -w "other_port=%{http_code}\\n" http://paddock.internal:${port === 65535 ? port - 1 : port + 1}/`,
      `curl -s -o /dev/null -w "loopback=%{http_code}\\n" http://127.0.0.1:${port}/api/auth/me --noproxy '' --proxy http://127.0.0.1:3128 || true`,
    ].join('\n');
    const started = await api(user.auth, 'POST', '/api/conversations', {
      agent_id: agent.body?.['id'],
      prompt: script,
    });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const id = String(started.body?.['id']);
    await waitFor('the turn to end', async () => {
      const turns = await api(user.auth, 'GET', `/api/conversations/${id}/turns`);
      const turn = (turns.body?.['data'] as { status: string }[] | undefined)?.[0];
      return turn && !['queued', 'running'].includes(turn.status) ? turn : undefined;
    });
    const rows = await deps.db
      .selectFrom('log_events')
      .select(['stream', 'data'])
      .where('conversation_id', '=', id)
      .where('stream', '=', 'stdout')
      .orderBy('id')
      .execute();
    const stdout = rows.map((r) => r.data?.toString('utf8') ?? '').join('');
    assert.match(
      stdout,
      new RegExp(`base=http://paddock.internal:${port} service=http://paddock.internal:${port}`),
    );
    assert.match(stdout, /me=200/);
    assert.ok(stdout.includes(`"email":"${user.email}"`), stdout);
    assert.match(stdout, /other_port=403/);
    assert.match(stdout, /loopback=403/);

    // The key, as the sandbox holds it (read by the test through the backend, not the log).
    const conv = await api(user.auth, 'GET', `/api/conversations/${id}`);
    const sandboxName = String((conv.body?.['sandbox'] as { name: string } | undefined)?.name);
    const client = createSandboxClient({ baseUrl: sandboxd.url, token: sandboxd.token });
    const key = (
      await client.exec(sandboxName, {
        cmd: ['sh', '-c', '. /home/sandbox/.paddock/env && printf %s "$PADDOCK_TOKEN"'],
      })
    ).stdout.toString('utf8');
    assert.match(key, /^pdk_/);
    assert.ok(!stdout.includes(key));
    assert.equal((await api({ authorization: `Bearer ${key}` }, 'GET', '/api/auth/me')).status, 200);
    // A conversation key is still refused by routes that do not opt in.
    assert.equal((await api({ authorization: `Bearer ${key}` }, 'GET', '/api/environments')).status, 403);

    const terminated = await api(user.auth, 'POST', `/api/conversations/${id}/terminate`);
    assert.equal(terminated.status, 200);
    await waitFor(
      'the key to be revoked',
      async () => {
        const res = await api({ authorization: `Bearer ${key}` }, 'GET', '/api/auth/me');
        return res.status === 401 ? res : undefined;
      },
      10_000,
    );
    assert.ok(!logs.join('').includes(key));
  });
});
