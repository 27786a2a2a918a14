// Rate limits with more than one replica (issue 39, finding 4). The counters are per node by
// default, so each instance allows a client the whole limit; with RATE_LIMIT_STORE=postgres
// every instance on the database counts in one bucket per client address
// (src/http/plugins/rate-limit-store.ts). Two real apps on one real database stand in for two
// replicas.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InjectOptions } from 'fastify';
import { createPostgresRateLimitStore } from '../src/http/plugins/rate-limit-store.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  await database.drop();
});

const LIMITS = { RATE_LIMIT_MAX: '6', RATE_LIMIT_WINDOW_SECONDS: '60', AUTH_RATE_LIMIT_MAX: '3' };

/** Statuses of `count` requests from one address, alternating between the two instances. */
async function alternate(
  apps: [TestApp, TestApp],
  count: number,
  request: InjectOptions,
  remoteAddress: string,
): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const res = await apps[i % 2]!.app.inject({ ...request, remoteAddress });
    statuses.push(res.statusCode);
  }
  return statuses;
}

describe('rate limits with two instances on one database', () => {
  describe('RATE_LIMIT_STORE unset (per node)', () => {
    let apps: [TestApp, TestApp];
    before(async () => {
      apps = [await buildTestApp({ database, env: LIMITS }), await buildTestApp({ database, env: LIMITS })];
    });
    after(async () => {
      for (const t of apps) await t.close();
    });

    it('lets one address make the limit on each instance: twice the limit in all', async () => {
      const statuses = await alternate(apps, 14, { method: 'GET', url: '/api/nope' }, '198.51.100.20');
      assert.deepEqual(statuses.slice(0, 12), Array(12).fill(404));
      assert.deepEqual(statuses.slice(12), [429, 429]);
    });
  });

  describe('RATE_LIMIT_STORE=postgres', () => {
    let apps: [TestApp, TestApp];
    before(async () => {
      const env = { ...LIMITS, RATE_LIMIT_STORE: 'postgres' };
      apps = [await buildTestApp({ database, env }), await buildTestApp({ database, env })];
    });
    after(async () => {
      for (const t of apps) await t.close();
    });

    it('two server instances on one database share one limit', async () => {
      const statuses = await alternate(apps, 8, { method: 'GET', url: '/api/nope' }, '198.51.100.21');
      assert.deepEqual(statuses, [404, 404, 404, 404, 404, 404, 429, 429]);
      const refused = await apps[0].app.inject({
        method: 'GET',
        url: '/api/nope',
        remoteAddress: '198.51.100.21',
      });
      assert.equal(refused.json().error, 'rate_limited');
      const retryAfter = Number(refused.headers['retry-after']);
      assert.ok(retryAfter > 0 && retryAfter <= 60, String(refused.headers['retry-after']));
      // Another address has a bucket of its own.
      const other = await apps[1].app.inject({
        method: 'GET',
        url: '/api/nope',
        remoteAddress: '198.51.100.22',
      });
      assert.equal(other.statusCode, 404);
    });

    it('meters failed authentication in the shared bucket', async () => {
      const statuses = await alternate(
        apps,
        8,
        { method: 'GET', url: '/api/agents', headers: { authorization: 'Bearer pk_not-a-key' } },
        '198.51.100.23',
      );
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401, 429, 429]);
    });

    it('shares the per-route budget of the credential endpoints too', async () => {
      const login: InjectOptions = {
        method: 'POST',
        url: '/api/auth/login',
        payload: { email: 'nobody@example.com', password: 'wrong password' },
      };
      const statuses = await alternate(apps, 5, login, '198.51.100.24');
      assert.deepEqual(statuses.slice(0, 3), [401, 401, 401]);
      assert.deepEqual(statuses.slice(3), [429, 429]);
      // Each route has its own budget: another credential route still answers.
      const resend = await apps[0].app.inject({
        method: 'POST',
        url: '/api/auth/resend-verification',
        payload: { email: 'nobody@example.com' },
        remoteAddress: '198.51.100.24',
      });
      assert.notEqual(resend.statusCode, 429);
    });
  });

  it('starts a bucket again once its window ended, and the sweep deletes ended buckets', async () => {
    const shared = createPostgresRateLimitStore({ pool: database.handle.pool, onSweepError: () => {} });
    try {
      const store = new shared.Store({});
      const hit = (windowMs: number) =>
        new Promise<{ current: number; ttl: number }>((resolve, reject) =>
          store.incr('203.0.113.50', (err, res) => (err || !res ? reject(err) : resolve(res)), windowMs, 10),
        );
      assert.equal((await hit(200)).current, 1);
      const second = await hit(200);
      assert.equal(second.current, 2);
      assert.ok(second.ttl > 0 && second.ttl <= 200, String(second.ttl));
      await new Promise((r) => setTimeout(r, 250));
      assert.equal((await hit(200)).current, 1, 'a new window');
      await new Promise((r) => setTimeout(r, 250));
      await shared.sweep();
      const left = await database.handle.pool.query(
        "SELECT count(*)::int AS n FROM rate_limit_buckets WHERE key = 'api 203.0.113.50'",
      );
      assert.equal(left.rows[0].n, 0);
    } finally {
      shared.close();
    }
  });
});
