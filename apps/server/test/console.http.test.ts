// The web console as the server serves it (src/console/console.routes.ts): client-side routes
// fall back to index.html, hashed assets are cached for a year, index.html never, and the
// server's own paths keep their meaning. Runs against a small build written to a temp dir
// (PADDOCK_CONSOLE_DIR), so it does not depend on the real console's bundle.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';

const INDEX =
  '<!doctype html><html><head><title>Paddock</title></head><body><div id="root"></div></body></html>';
const SCRIPT = `console.log(${JSON.stringify('x'.repeat(4000))});`;

let database: TestDatabase;
let dir: string;
let t: TestApp;
before(async () => {
  database = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'paddock-console-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), INDEX);
  writeFileSync(join(dir, 'assets/index-AbC123.js'), SCRIPT);
  writeFileSync(join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  t = await buildTestApp({ database, env: { PADDOCK_CONSOLE_DIR: dir } });
});
after(async () => {
  await t.close();
  await database.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the console at /', () => {
  it('answers / and every client-side route with index.html, never cached', async () => {
    for (const url of [
      '/',
      '/conversations',
      '/conversations/0193abcd-0000-7000-8000-000000000000',
      '/sign-in?next=%2F',
    ]) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.equal(res.body, INDEX, url);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(res.headers['cache-control'], 'no-cache');
      assert.match(String(res.headers['content-security-policy']), /script-src 'self'/);
    }
  });

  it('serves hashed assets with a year-long immutable cache, gzip-compressed when the browser takes it', async () => {
    const plain = await t.app.inject({ method: 'GET', url: '/assets/index-AbC123.js' });
    assert.equal(plain.statusCode, 200);
    assert.equal(plain.body, SCRIPT);
    assert.equal(plain.headers['content-type'], 'text/javascript; charset=utf-8');
    assert.equal(plain.headers['cache-control'], 'public, max-age=31536000, immutable');
    const gz = await t.app.inject({
      method: 'GET',
      url: '/assets/index-AbC123.js',
      headers: { 'accept-encoding': 'gzip, br' },
    });
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.equal(gz.headers['vary'], 'accept-encoding');
    assert.equal(gunzipSync(gz.rawPayload).toString(), SCRIPT);
  });

  it('serves unhashed files of the build without a long cache', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/favicon.svg' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'image/svg+xml');
    assert.equal(res.headers['cache-control'], 'no-cache');
  });

  it('answers a missing asset with 404, never the app', async () => {
    for (const url of ['/assets/index-Missing.js', '/nothing.png', '/assets/']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().error, 'not_found');
    }
  });

  it('keeps the server paths: unknown /api, /auth, /health and /metrics paths are JSON 404s', async () => {
    for (const url of ['/api/nope', '/api', '/auth/nope', '/health/nope', '/metrics']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().error, 'not_found', url);
    }
    const health = await t.app.inject({ method: 'GET', url: '/health' });
    assert.deepEqual(health.json(), { status: 'ok' });
    const doc = await t.app.inject({ method: 'GET', url: '/api/openapi.json' });
    assert.equal(doc.statusCode, 200);
  });

  it('never resolves a request path on disk (traversal answers 404 or the app, never a file outside the build)', async () => {
    for (const url of ['/../package.json', '/assets/..%2f..%2fpackage.json', '/%2e%2e/%2e%2e/etc/passwd']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.ok(!res.body.includes('"name"') && !res.body.includes('root:'), url);
    }
  });

  it('answers other methods on console paths with the JSON 404', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/conversations', payload: {} });
    assert.equal(res.statusCode, 404);
  });
});

describe('a server without a console build', () => {
  it('says how to build it instead of failing obscurely, and keeps the API', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'paddock-console-empty-'));
    const bare = await buildTestApp({ database, env: { PADDOCK_CONSOLE_DIR: empty } });
    try {
      const res = await bare.app.inject({ method: 'GET', url: '/' });
      assert.equal(res.statusCode, 503);
      assert.match(res.json().message, /npm run build:web/);
      assert.equal((await bare.app.inject({ method: 'GET', url: '/health' })).statusCode, 200);
    } finally {
      await bare.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
