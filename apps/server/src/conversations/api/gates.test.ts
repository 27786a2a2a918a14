// gates.ts against the real database: the spec's order of the admission gates (quota before
// suspension), the per-user lock, and the subscription and suspension gates that run again on
// every turn and on reattach (continuation). The HTTP order is proved in
// test/conversations.routes.test.ts; a suspended account's API key never authenticates at all,
// so the suspension gate is reached by work already accepted (a queued turn, a reattach).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { createVerifiedUser } from '../../../test/helpers/factories.ts';
import { AppError } from '../../http/errors.ts';
import { createGates } from './gates.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

const codeOf = async (work: Promise<unknown>) => {
  try {
    await work;
    return 'passed';
  } catch (err) {
    return err instanceof AppError ? err.code : String(err);
  }
};

async function liveSandboxes(tenantId: string, n: number) {
  for (let i = 0; i < n; i++) {
    const id = uuidv7();
    await t.deps.db
      .insertInto('conversations')
      .values({ id, tenant_id: tenantId, status: 'idle', source: 'api', title: 't' })
      .execute();
    await t.deps.db
      .insertInto('sandboxes')
      .values({
        id: uuidv7(),
        tenant_id: tenantId,
        conversation_id: id,
        name: `paddock-test-${uuidv7()}`,
        status: 'ready',
      })
      .execute();
  }
}

describe('gates (gates.ts)', () => {
  it('refuses a suspended account with 403 account_suspended at admission and on every turn', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const gates = createGates({ db: t.deps.db, maxSandboxesPerUser: 5 });
    assert.equal(await codeOf(gates.continuation(user.id)), 'passed');
    await t.deps.db
      .updateTable('users')
      .set({ suspended_at: new Date() })
      .where('id', '=', user.id)
      .execute();
    assert.equal(await codeOf(gates.continuation(user.id)), 'account_suspended');
    const admitted = t.deps.db
      .transaction()
      .execute((trx) => gates.admit(trx, user.id, { newSandbox: true }));
    assert.equal(await codeOf(admitted), 'account_suspended');
  });

  it('checks the quota before the suspension (the spec order), only when a new sandbox is needed', async () => {
    const user = await createVerifiedUser(t.deps.db);
    await liveSandboxes(user.id, 2);
    await t.deps.db
      .updateTable('users')
      .set({ suspended_at: new Date() })
      .where('id', '=', user.id)
      .execute();
    const gates = createGates({ db: t.deps.db, maxSandboxesPerUser: 2 });
    const full = t.deps.db.transaction().execute((trx) => gates.admit(trx, user.id, { newSandbox: true }));
    assert.equal(await codeOf(full), 'sandbox_quota_exceeded');
    const reuse = t.deps.db.transaction().execute((trx) => gates.admit(trx, user.id, { newSandbox: false }));
    assert.equal(await codeOf(reuse), 'account_suspended');
  });

  it('says the quota in words, in the singular for one sandbox', async () => {
    const user = await createVerifiedUser(t.deps.db);
    await liveSandboxes(user.id, 2);
    const messageOf = async (maxSandboxesPerUser: number) => {
      const gates = createGates({ db: t.deps.db, maxSandboxesPerUser });
      try {
        await t.deps.db.transaction().execute((trx) => gates.admit(trx, user.id, { newSandbox: true }));
        return 'passed';
      } catch (err) {
        return err instanceof Error ? err.message : String(err);
      }
    };
    assert.equal(await messageOf(1), 'at most 1 sandbox may run at once per user; terminate one or wait');
    assert.equal(await messageOf(2), 'at most 2 sandboxes may run at once per user; terminate one or wait');
  });

  it('runs the subscription hook on every turn: 402 subscription_required with upgrade_url', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const gates = createGates({
      db: t.deps.db,
      maxSandboxesPerUser: 5,
      subscription: async () => ({ upgradeUrl: 'https://paddock.example/upgrade' }),
    });
    try {
      await gates.continuation(user.id);
      assert.fail('the gate passed');
    } catch (err) {
      assert.ok(err instanceof AppError);
      assert.equal(err.code, 'subscription_required');
      assert.equal(err.status, 402);
      assert.equal(err.extra['upgrade_url'], 'https://paddock.example/upgrade');
    }
    const billingOff = createGates({ db: t.deps.db, maxSandboxesPerUser: 5 });
    assert.equal(await codeOf(billingOff.subscription(user.id)), 'passed');
  });
});
