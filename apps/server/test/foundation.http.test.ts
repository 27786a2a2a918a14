import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startMetricsServer } from '../src/observability/metrics.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createVerifiedUser } from './helpers/factories.ts';

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  await database.drop();
});

describe('public listener', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database });
  });
  after(async () => {
    await t.close();
  });

  it('answers GET /health with 200 and checks nothing', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/health' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: 'ok' });
  });

  it('answers GET /health/ready with the database check', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { checks: { database: 'ok' }, status: 'ok' });
  });

  it('serves an OpenAPI 3.1 document publicly at /api/openapi.json', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/openapi.json' });
    assert.equal(res.statusCode, 200);
    const doc = res.json() as { openapi: string; paths: Record<string, unknown> };
    assert.match(doc.openapi, /^3\.1\.\d+$/);
  });

  it('serves interactive docs at /api/docs', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/docs' });
    assert.equal(res.statusCode, 200);
    assert.match(res.headers['content-type'] ?? '', /text\/html/);
  });

  it('has a schema on every /api route, and documents each of them', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    const apiRoutes = t.app.routeTable.filter(
      (r) => r.url.startsWith('/api') && !r.schemaless && r.method !== 'HEAD',
    );
    const missing = apiRoutes.filter((r) => !r.hasSchema).map((r) => `${r.method} ${r.url}`);
    assert.deepEqual(missing, [], 'routes under /api without a schema');
    for (const r of apiRoutes) {
      const openapiPath = r.url.replace(/:([A-Za-z_]+)/g, '{$1}');
      assert.ok(
        doc.paths[openapiPath]?.[r.method.toLowerCase()],
        `${r.method} ${r.url} is missing from openapi.json`,
      );
    }
  });

  it('answers unknown /api paths with the JSON error shape', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/nope' });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'not_found');
    assert.equal(typeof res.json().message, 'string');
  });

  it('answers 422, not 500, to text PostgreSQL cannot store', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'a\u0000@example.com', password: 'whatever passphrase' },
    });
    assert.equal(res.statusCode, 422);
    assert.equal(res.json().error, 'validation_failed');
  });

  it('keeps one-time tokens in URLs out of the request log', async () => {
    const sentinel = `tok${Date.now()}sentinel`;
    await t.app.inject({ method: 'GET', url: `/auth/verify?token=${sentinel}&x=1` });
    await t.app.inject({ method: 'GET', url: `/api/nope?code=${sentinel}` });
    assert.ok(t.logs.some((l) => l.includes('/auth/verify?token=[redacted]')));
    assert.ok(!t.logs.some((l) => l.includes(sentinel)), 'a token reached a log line');
  });

  it('answers 400 invalid_body to a body that is not valid JSON, without echoing internals', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: '{"email": "a@example.com", "password": ',
    });
    assert.equal(res.statusCode, 400);
    assert.deepEqual(res.json(), { error: 'invalid_body', message: 'request body is not valid JSON' });
  });

  it('answers 400 invalid_body to a body that is not JSON, whatever its media type, on every route', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const cases = [
      { url: '/api/auth/login', auth: {}, type: 'text/xml', payload: '<login/>' },
      { url: '/api/auth/login', auth: {}, type: 'text/plain', payload: '{"email":"a@example.com"}' },
      { url: '/api/conversations', auth: user.auth, type: 'text/plain', payload: 'hello' },
      { url: '/api/agents', auth: user.auth, type: 'text/plain; charset=utf-8', payload: 'hello' },
      { url: '/api/agents', auth: user.auth, type: 'application/x-www-form-urlencoded', payload: 'a=b' },
    ];
    for (const c of cases) {
      const res = await t.app.inject({
        method: 'POST',
        url: c.url,
        headers: { ...c.auth, 'content-type': c.type },
        payload: c.payload,
      });
      assert.equal(res.statusCode, 400, `${c.type} to ${c.url}`);
      assert.deepEqual(res.json(), {
        error: 'invalid_body',
        message: 'the request body must be JSON (Content-Type: application/json)',
      });
    }
  });

  it('never serves /metrics on the public listener', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(res.statusCode, 404);
  });

  it('sends security headers on every response', async () => {
    for (const url of ['/health', '/api/openapi.json', '/api/nope']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.equal(res.headers['referrer-policy'], 'strict-origin-when-cross-origin');
      assert.equal(res.headers['strict-transport-security'], undefined, 'no HSTS on an http PUBLIC_URL');
      assert.ok(res.headers['x-request-id']);
    }
  });
});

describe('private metrics listener', () => {
  it('serves Prometheus metrics with the HTTP duration histogram by route and status', async () => {
    const t = await buildTestApp({ database });
    const server = await startMetricsServer(t.deps.metrics, 0, '127.0.0.1');
    try {
      await t.app.inject({ method: 'GET', url: '/health' });
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(metrics.status, 200);
      const text = await metrics.text();
      assert.match(text, /paddock_process_cpu_user_seconds_total/);
      assert.match(
        text,
        /paddock_http_request_duration_seconds_bucket\{[^}]*route="\/health"[^}]*status_code="200"/,
      );
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      assert.equal(health.status, 200);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
      await t.close();
    }
  });
});

describe('edge behaviour with an https PUBLIC_URL', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({
      database,
      env: { PUBLIC_URL: 'https://paddock.example.com', TRUSTED_PROXIES: '10.0.0.0/8' },
    });
  });
  after(async () => {
    await t.close();
  });

  it('redirects plain HTTP to HTTPS', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/api/openapi.json?x=1',
      remoteAddress: '203.0.113.9',
    });
    assert.equal(res.statusCode, 301);
    assert.equal(res.headers.location, 'https://paddock.example.com/api/openapi.json?x=1');
    const post = await t.app.inject({ method: 'POST', url: '/api/anything', remoteAddress: '203.0.113.9' });
    assert.equal(post.statusCode, 308);
  });

  it('never redirects to another host (no open redirect through //host paths)', async () => {
    const res = await t.app.inject({ method: 'GET', url: '//evil.example/x', remoteAddress: '203.0.113.9' });
    assert.equal(res.statusCode, 301);
    assert.equal(new URL(String(res.headers.location)).origin, 'https://paddock.example.com');
  });

  it('exempts health probes from the redirect', async () => {
    assert.equal((await t.app.inject({ method: 'GET', url: '/health' })).statusCode, 200);
    assert.equal((await t.app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200);
  });

  it('trusts X-Forwarded-Proto only from TRUSTED_PROXIES (IPv4-mapped addresses included)', async () => {
    const viaHttps = async (remoteAddress: string) =>
      (
        await t.app.inject({
          method: 'GET',
          url: '/api/openapi.json',
          remoteAddress,
          headers: { 'x-forwarded-proto': 'https' },
        })
      ).statusCode;
    assert.equal(await viaHttps('10.1.2.3'), 200);
    assert.equal(await viaHttps('::ffff:10.1.2.3'), 200);
    assert.equal(await viaHttps('203.0.113.9'), 301, 'a spoofed header from an untrusted peer');
  });

  it('sends HSTS for one year with subdomains and without preload', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/health' });
    assert.equal(res.headers['strict-transport-security'], 'max-age=31536000; includeSubDomains');
  });
});

describe('rate limiting on /api', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({
      database,
      env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '60', TRUSTED_PROXIES: '10.0.0.0/8' },
    });
  });
  after(async () => {
    await t.close();
  });

  it('answers a burst past the limit with 429 and Retry-After', async () => {
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof t.app.inject>> | undefined;
    for (let i = 0; i < 7; i++) {
      last = await t.app.inject({ method: 'GET', url: '/api/nope', remoteAddress: '198.51.100.1' });
      statuses.push(last.statusCode);
    }
    assert.deepEqual(statuses, [404, 404, 404, 404, 404, 429, 429]);
    assert.ok(Number(last?.headers['retry-after']) > 0);
    assert.equal(last?.json().error, 'rate_limited');
  });

  it('keeps a spoofed X-Forwarded-For from an untrusted peer in its own bucket', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/api/nope',
        remoteAddress: '198.51.100.2',
        headers: { 'x-forwarded-for': `192.0.2.${i}` },
      });
      statuses.push(res.statusCode);
    }
    assert.deepEqual(statuses.slice(5), [429, 429]);
  });

  it('gives each real client behind a trusted proxy its own bucket', async () => {
    for (let i = 0; i < 7; i++) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/api/nope',
        remoteAddress: '10.0.0.1',
        headers: { 'x-forwarded-for': `192.0.2.${100 + i}` },
      });
      assert.equal(res.statusCode, 404);
    }
  });

  it('limits percent-encoded spellings of /api paths in the same bucket', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const url = i % 2 === 0 ? '/%61pi/openapi.json' : '/api/openapi.json';
      statuses.push((await t.app.inject({ method: 'GET', url, remoteAddress: '198.51.100.3' })).statusCode);
    }
    assert.deepEqual(statuses.slice(5), [429, 429]);
  });

  it('puts every address of one IPv6 /64 in one bucket', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/api/nope',
        remoteAddress: `2001:db8:7:7::${i + 1}`,
      });
      statuses.push(res.statusCode);
    }
    assert.deepEqual(statuses.slice(5), [429, 429]);
  });

  it('meters failed authentication: requests with a bad API key past the limit answer 429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/api/agents',
        remoteAddress: '198.51.100.4',
        headers: { authorization: `Bearer pk_not-a-key-${i}` },
      });
      statuses.push(res.statusCode);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429]);
    // A request without any credential counts in the same bucket.
    const bare = await t.app.inject({ method: 'GET', url: '/api/agents', remoteAddress: '198.51.100.4' });
    assert.equal(bare.statusCode, 429);
    assert.equal(bare.json().error, 'rate_limited');
  });

  it('does not limit health probes', async () => {
    for (let i = 0; i < 10; i++) {
      const res = await t.app.inject({ method: 'GET', url: '/health', remoteAddress: '198.51.100.1' });
      assert.equal(res.statusCode, 200);
    }
  });
});
