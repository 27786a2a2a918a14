import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

describe('a secret upsert racing the deletion of its environment', () => {
  let t: TestApp;
  let user: TestUser;
  before(async () => {
    t = await buildTestApp();
    user = await createVerifiedUser(t.deps.db);
  });
  after(async () => {
    await t.close();
  });

  it('answers 404 (or succeeds first), never 500', async () => {
    const statuses = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const env = await t.app.inject({
        method: 'POST',
        url: '/api/environments',
        headers: user.auth,
        payload: { name: `race-${i}` },
      });
      assert.equal(env.statusCode, 201);
      const id = env.json().id as string;
      const [upsert, del] = await Promise.all([
        t.app.inject({
          method: 'POST',
          url: `/api/environments/${id}/secrets`,
          headers: user.auth,
          payload: { key: 'TOKEN', value: `value-${i}` },
        }),
        t.app.inject({ method: 'DELETE', url: `/api/environments/${id}`, headers: user.auth }),
      ]);
      statuses.add(upsert.statusCode);
      assert.ok([200, 201, 404].includes(upsert.statusCode), `upsert answered ${upsert.statusCode}`);
      assert.equal(del.statusCode, 204);
    }
    assert.ok(!statuses.has(500));
  });
});
