// Issue 42, deliverable 1: with BILLING_ENABLED off (the default) no billing field, route or
// page exists: /api/auth/me carries subscription_status null and no other billing field, no
// /api/billing path is registered or documented, /account/billing is a 404 (not the console),
// registration writes no billing row, the expire-legacy-trials task refuses, and no start is
// ever refused with 402. Billing on, the same routes and page exist (the contrast that makes
// the off assertions mean something).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { expireLegacyTrialsTask } from '../src/billing/legacy-trials.task.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createVerifiedUser } from './helpers/factories.ts';

let database: TestDatabase;
let dir: string;
let off: TestApp;
let on: TestApp;
before(async () => {
  database = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'paddock-billing-off-'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>Paddock</title><div id="root"></div>');
  off = await buildTestApp({ database, env: { PADDOCK_CONSOLE_DIR: dir } });
  on = await buildTestApp({ database, env: { PADDOCK_CONSOLE_DIR: dir, BILLING_ENABLED: 'true' } });
});
after(async () => {
  await off.close();
  await on.close();
  await database.drop();
  rmSync(dir, { recursive: true, force: true });
});

const BILLING_FIELDS = ['trial_ends_at', 'current_period_end', 'cancel_at_period_end'];

async function routesOf(t: TestApp): Promise<string[]> {
  const doc = (await t.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
  return Object.keys(doc.paths);
}

describe('billing off (BILLING_ENABLED unset)', () => {
  it('lists no billing route and serves no billing page; billing on, both exist', async () => {
    const offRoutes = await routesOf(off);
    assert.deepEqual(
      offRoutes.filter((p) => p.includes('billing')),
      [],
    );
    assert.ok(!off.app.printRoutes({ commonPrefix: false }).includes('billing'));
    const onRoutes = await routesOf(on);
    for (const p of [
      '/api/billing',
      '/api/billing/checkout',
      '/api/billing/portal',
      '/api/billing/cancel-at-period-end',
    ])
      assert.ok(onRoutes.includes(p), `${p} exists with billing on`);

    const user = await createVerifiedUser(database.handle.db);
    for (const [method, url] of [
      ['GET', '/api/billing'],
      ['POST', '/api/billing/checkout'],
      ['POST', '/api/billing/portal'],
    ] as const) {
      const res = await off.app.inject({ method, url, headers: user.auth });
      assert.equal(res.statusCode, 404, `${method} ${url}`);
    }
    const page = await off.app.inject({ method: 'GET', url: '/account/billing' });
    assert.equal(page.statusCode, 404);
    assert.match(String(page.headers['content-type']), /application\/json/);
    const onPage = await on.app.inject({ method: 'GET', url: '/account/billing' });
    assert.equal(onPage.statusCode, 200);
    assert.match(onPage.body, /<div id="root">/);
    // The other account pages stay.
    assert.equal((await off.app.inject({ method: 'GET', url: '/account/security' })).statusCode, 200);
  });

  it('reports subscription_status null and no other billing field on /api/auth/me, in the document too', async () => {
    const user = await createVerifiedUser(database.handle.db);
    const me = (await off.app.inject({ method: 'GET', url: '/api/auth/me', headers: user.auth })).json();
    assert.equal(me.subscription_status, null);
    for (const f of BILLING_FIELDS) assert.ok(!(f in me), `${f} absent`);
    const site = (await off.app.inject({ method: 'GET', url: '/api/site' })).json();
    assert.deepEqual(site.billing, { enabled: false, price_monthly_cents: null });
  });

  it('writes no billing row at registration and never answers 402; the legacy task refuses', async () => {
    const email = `off-${Date.now()}@example.com`;
    const reg = await off.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email, password: 'a long enough password 1' },
    });
    assert.equal(reg.statusCode, 201, reg.body);
    const rows = await database.handle.db
      .selectFrom('billing_accounts')
      .select('user_id')
      .where('user_id', '=', reg.json().user.id)
      .execute();
    assert.equal(rows.length, 0);
    assert.equal(off.deps.billing, undefined);
    // The gate with billing off is the pass-through: a row (left from an earlier billing-on
    // period) saying canceled does not refuse.
    const user = await createVerifiedUser(database.handle.db);
    await database.handle.db
      .insertInto('billing_accounts')
      .values({ user_id: user.id, status: 'canceled' })
      .execute();
    const agent = await off.app.inject({
      method: 'POST',
      url: '/api/agents',
      headers: user.auth,
      payload: { name: 'a', model: 'anthropic/claude-sonnet-4-5', runtime: 'claude' },
    });
    assert.equal(agent.statusCode, 201, agent.body);
    const start = await off.app.inject({
      method: 'POST',
      url: '/api/conversations',
      headers: user.auth,
      payload: { agent_id: agent.json().id, prompt: 'true' },
    });
    assert.equal(start.statusCode, 201, start.body);
    const refused = await on.app.inject({
      method: 'POST',
      url: '/api/conversations',
      headers: user.auth,
      payload: { agent_id: agent.json().id, prompt: 'true' },
    });
    assert.equal(refused.statusCode, 402, 'the same account is refused with billing on');
    await off.deps.conversationEngine.stop();
    await assert.rejects(
      expireLegacyTrialsTask.run({ deps: off.deps, args: [], print: () => {} }),
      /billing is not enabled/,
    );
  });
});
