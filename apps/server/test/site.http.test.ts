// Public pages (issue 11, item 7): GET /api/site for the console's home page, /terms and
// /privacy only with the four LEGAL_* variables, and /llms.txt, /llms-full.txt and /skill
// generated from the OpenAPI document.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';

const LEGAL = {
  LEGAL_ENTITY: 'Example <script>alert(1)</script> GmbH',
  LEGAL_CONTACT_EMAIL: 'legal@example.com',
  LEGAL_JURISDICTION: 'Germany',
  LEGAL_EFFECTIVE_DATE: '2026-01-01',
};

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  await database.drop();
});

describe('a default instance (billing off, no legal variables)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database, env: { BILLING_PRICE_MONTHLY_CENTS: '1900' } });
  });
  after(async () => {
    await t.close();
  });

  it('tells the home page: no price while billing is off, no legal pages, registration open', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/site' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), {
      billing: { enabled: false, price_monthly_cents: null },
      legal: false,
      registration_enabled: true,
    });
  });

  it('has no /terms or /privacy at all (404, not the console)', async () => {
    for (const url of ['/terms', '/privacy']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().error, 'not_found');
    }
  });

  it('serves /llms.txt: every operation of the OpenAPI document, public, as text', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/llms.txt' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
    assert.match(res.body, /^# Paddock API/);
    const doc = (await t.app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of Object.keys(item).filter((m) => ['get', 'post', 'put', 'delete'].includes(m))) {
        assert.ok(res.body.includes(`\`${method.toUpperCase()} ${path}\``), `${method} ${path} is listed`);
      }
    }
    assert.match(res.body, /\/llms-full\.txt/);
  });

  it('serves /llms-full.txt with parameters, body fields and answers of each operation', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/llms-full.txt' });
    assert.equal(res.statusCode, 200);
    const section = res.body.split('### POST /api/conversations\n')[1]?.split('\n### ')[0] ?? '';
    assert.match(section, /Body \(JSON\):/);
    assert.match(section, /- agent_id: string/);
    assert.match(section, /- vault_id \(optional\)/);
    assert.match(section, /- 201: \{ id: string/);
    assert.match(res.body, /### GET \/api\/conversations\/\{id\}\/stream/);
  });

  it('serves /skill: a SKILL.md that starts sub-conversations with PADDOCK_TOKEN and PADDOCK_BASE_URL', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/skill' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/markdown; charset=utf-8');
    assert.match(res.body, /^---\nname: paddock\ndescription: .+\n---\n/);
    assert.match(res.body, /Authorization: Bearer \$PADDOCK_TOKEN/);
    assert.match(res.body, /"\$PADDOCK_BASE_URL\/api\/conversations"/);
    assert.match(res.body, /parent_conversation_id/);
    assert.match(res.body, /`POST \/api\/conversations`/);
  });
});

describe('the origin /llms.txt, /skill and the OpenAPI document name (issue 37, finding 8)', () => {
  it('in development: the loopback origin the request reached, never a foreign Host', async () => {
    const t = await buildTestApp({ database, env: { PORT: '4777', HOST: '127.0.0.1' } });
    try {
      const at = async (url: string, host: string) =>
        (await t.app.inject({ method: 'GET', url, headers: { host } })).body;
      const own = await at('/llms.txt', '127.0.0.1:4777');
      assert.match(own, /^Base URL: http:\/\/127\.0\.0\.1:4777\./m);
      assert.match(own, /\(http:\/\/127\.0\.0\.1:4777\/llms-full\.txt\)/);
      assert.doesNotMatch(own, /localhost/);
      assert.match(await at('/llms.txt', 'localhost:4777'), /^Base URL: http:\/\/localhost:4777\./m);
      assert.match(await at('/skill', '127.0.0.1:4777'), /http:\/\/127\.0\.0\.1:4777\/llms-full\.txt/);
      const doc = JSON.parse(await at('/api/openapi.json', '127.0.0.1:4777')) as {
        servers: { url: string }[];
      };
      assert.deepEqual(doc.servers, [{ url: 'http://127.0.0.1:4777' }]);
      // A Host that is not this server's (or carries markup) is never echoed: the stand-in,
      // the origin the server prints (PUBLIC_URL's default).
      for (const host of ['evil.example', '127.0.0.1:4777"><script>', 'localhost:9999']) {
        const body = await at('/llms.txt', host);
        assert.match(body, /^Base URL: http:\/\/127\.0\.0\.1:4777\./m, host);
        assert.ok(!body.includes('evil') && !body.includes('<script>') && !body.includes('9999'), host);
      }
    } finally {
      await t.close();
    }
  });

  it('with PUBLIC_URL set: always PUBLIC_URL, whatever the Host header says', async () => {
    const t = await buildTestApp({ database, env: { PUBLIC_URL: 'http://paddock.example.com' } });
    try {
      const res = await t.app.inject({
        method: 'GET',
        url: '/llms.txt',
        headers: { host: '127.0.0.1:4000' },
      });
      assert.match(res.body, /^Base URL: http:\/\/paddock\.example\.com\./m);
      assert.doesNotMatch(res.body, /127\.0\.0\.1/);
    } finally {
      await t.close();
    }
  });
});

describe('an instance with billing and the legal variables', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({
      database,
      env: { BILLING_ENABLED: 'true', BILLING_PRICE_MONTHLY_CENTS: '1900', ...LEGAL },
    });
  });
  after(async () => {
    await t.close();
  });

  it('gives the price and announces the legal pages', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/site' });
    assert.deepEqual(res.json().billing, { enabled: true, price_monthly_cents: 1900 });
    assert.equal(res.json().legal, true);
  });

  it('serves /terms and /privacy with the operator named, every value escaped (a script in LEGAL_ENTITY stays text)', async () => {
    for (const url of ['/terms', '/privacy']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
      assert.ok(res.body.includes('Example &lt;script&gt;alert(1)&lt;/script&gt; GmbH'), url);
      assert.ok(!res.body.includes('<script>'), url);
      assert.match(res.body, /legal@example\.com/);
      assert.match(res.body, /Germany/);
    }
  });
});
