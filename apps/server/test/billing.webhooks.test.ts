// POST /api/billing/webhook through the real app and PostgreSQL, every event signed with the
// official SDK's `generateTestHeaderString` (helpers/billing-events.ts): signature on the raw
// body with the 300 s tolerance, secret rotation, claim and apply in one transaction (50 at
// once → one effect; a failed apply recorded and applied on redelivery), order-awareness, the
// subscription of record, dunning recovery, and mails whose enqueue failure never errors it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import {
  billingRow,
  checkoutSessionObject,
  deliver,
  event,
  insertBillingRow,
  invoiceObject,
  newId,
  queuedBillingMails,
  seconds,
  sign,
  subscriptionObject,
  WEBHOOK_SECRET,
} from './helpers/billing-events.ts';
import { createVerifiedUser } from './helpers/factories.ts';

const MIN = 60_000;
const ago = (ms: number) => new Date(Date.now() - ms);

// Mail is "made" (an SMTP host is set) so lifecycle mails are enqueued; no job runner runs here,
// so they wait in the queue where the tests count them (billing.mail.test.ts sends them).
const env = {
  BILLING_ENABLED: 'true',
  BILLING_WEBHOOK_SECRET: WEBHOOK_SECRET,
  BILLING_PRICE_MONTHLY_CENTS: '1900',
  EMAIL_DELIVERY: '',
  SMTP_HOST: '127.0.0.1',
  SMTP_PORT: '9',
};

let t: TestApp;
before(async () => {
  t = await buildTestApp({ env });
});
after(async () => {
  await t?.close();
});

/** A verified account with a billing row holding a subscription of record. */
async function subscriber(
  status: 'active' | 'past_due' | 'trialing' | 'comped' | 'canceled',
  stateAt = ago(60 * MIN),
) {
  const user = await createVerifiedUser(t.deps.db);
  const sub = newId('sub');
  const customer = newId('cus');
  await insertBillingRow(t.deps.db, user.id, { status, customerId: customer, subscriptionId: sub, stateAt });
  return { user, sub, customer };
}

async function eventRow(id: string) {
  return await t.deps.db.selectFrom('billing_events').selectAll().where('id', '=', id).executeTakeFirst();
}

const mailsFor = async (userId: string) =>
  (await queuedBillingMails(t.deps.db)).filter((m) => m.userId === userId).map((m) => m.kind);

describe('the billing webhook: signatures', () => {
  it('applies an event signed with the SDK under BILLING_WEBHOOK_SECRET', async () => {
    const { user, sub, customer } = await subscriber('active');
    const e = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'active', cancelAtPeriodEnd: true }),
      ago(MIN),
    );
    const res = await deliver(t, e);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { received: true, outcome: 'applied' });
    assert.equal((await billingRow(t.deps.db, user.id)).cancel_at_period_end, true);
  });

  it('answers 400 to a body changed by one byte and changes nothing', async () => {
    const { user, sub, customer } = await subscriber('active');
    const e = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'past_due' }),
      ago(MIN),
    );
    const payload = JSON.stringify(e);
    const header = sign(payload);
    const tampered = payload.replace('"past_due"', '"past_duf"');
    assert.equal(tampered.length, payload.length);
    const res = await deliver(t, tampered, { header });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error, 'invalid_signature');
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'active');
    assert.equal(await eventRow(e.id), undefined, 'a refused delivery claims nothing');
    // The untouched body with the same header is accepted: the byte was the only difference.
    assert.equal((await deliver(t, payload, { header })).statusCode, 200);
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'past_due');
  });

  it('answers 400 to a signature 301 s old and accepts one 290 s old', async () => {
    const { user, sub, customer } = await subscriber('active');
    const old = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'past_due' }),
      ago(10 * MIN),
    );
    const stale = await deliver(t, old, { timestamp: Math.floor(Date.now() / 1000) - 301 });
    assert.equal(stale.statusCode, 400);
    assert.equal(stale.json().error, 'invalid_signature');
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'active');
    const recent = await deliver(t, old, { timestamp: Math.floor(Date.now() / 1000) - 290 });
    assert.equal(recent.statusCode, 200, recent.body);
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'past_due');
  });

  it('answers 400 to a missing or foreign signature, and to a header without v1', async () => {
    const { sub, customer } = await subscriber('active');
    const e = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'active' }),
      ago(MIN),
    );
    const payload = JSON.stringify(e);
    const none = await t.app.inject({
      method: 'POST',
      url: '/api/billing/webhook',
      headers: { 'content-type': 'application/json' },
      payload,
    });
    assert.equal(none.statusCode, 400);
    assert.equal((await deliver(t, e, { secret: 'whsec_someone_else' })).statusCode, 400);
    assert.equal((await deliver(t, e, { header: `t=${seconds(new Date())}` })).statusCode, 400);
    assert.ok(!t.logs.some((l) => l.includes(WEBHOOK_SECRET)), 'the secret never reaches a log line');
  });

  it('accepts several signatures in one header during a secret rotation', async () => {
    const { user, sub, customer } = await subscriber('active');
    const e = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'past_due' }),
      ago(MIN),
    );
    const payload = JSON.stringify(e);
    const ts = Math.floor(Date.now() / 1000);
    const oldSig = sign(payload, { secret: 'whsec_the_old_one', timestamp: ts }).split('v1=')[1];
    const newSig = sign(payload, { timestamp: ts }).split('v1=')[1];
    const res = await deliver(t, payload, { header: `t=${ts},v1=${oldSig},v1=${newSig}` });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'past_due');
  });

  it('accepts an event signed under any of several comma-separated secrets', async () => {
    const other = await buildTestApp({
      database: t.database,
      env: { ...env, BILLING_WEBHOOK_SECRET: `whsec_new_one, ${WEBHOOK_SECRET}` },
    });
    try {
      const { user, sub, customer } = await subscriber('active');
      const first = event(
        'customer.subscription.updated',
        subscriptionObject({ id: sub, customer, status: 'past_due' }),
        ago(2 * MIN),
      );
      assert.equal((await deliver(other, first)).statusCode, 200, 'signed with the second secret');
      const second = event(
        'customer.subscription.updated',
        subscriptionObject({ id: sub, customer, status: 'active' }),
        ago(MIN),
      );
      assert.equal((await deliver(other, second, { secret: 'whsec_new_one' })).statusCode, 200);
      assert.equal(
        (await deliver(other, event('invoice.paid', {}, new Date()), { secret: 'whsec_neither' })).statusCode,
        400,
      );
      assert.equal((await billingRow(t.deps.db, user.id)).status, 'active');
    } finally {
      await other.app.close();
    }
  });

  it('rejects every request while BILLING_WEBHOOK_SECRET is unset', async () => {
    const unset = await buildTestApp({ database: t.database, env: { ...env, BILLING_WEBHOOK_SECRET: '' } });
    try {
      const { user, sub, customer } = await subscriber('active');
      const e = event(
        'customer.subscription.updated',
        subscriptionObject({ id: sub, customer, status: 'past_due' }),
        ago(MIN),
      );
      for (const secret of [WEBHOOK_SECRET, '', 'whsec_anything']) {
        const res = await deliver(unset, e, { secret });
        assert.equal(res.statusCode, 400, `signed with "${secret}"`);
        assert.equal(res.json().error, 'invalid_signature');
      }
      assert.equal((await billingRow(t.deps.db, user.id)).status, 'active');
      assert.ok(unset.logs.some((l) => l.includes('BILLING_WEBHOOK_SECRET is not set')));
    } finally {
      await unset.app.close();
    }
  });
});

describe('the billing webhook: claim and apply', () => {
  it('applies 50 identical deliveries at once exactly once', async () => {
    const { user, sub, customer } = await subscriber('past_due');
    const e = event('invoice.paid', invoiceObject({ subscription: sub, customer, status: 'paid' }), ago(MIN));
    const payload = JSON.stringify(e);
    const header = sign(payload);
    const answers = await Promise.all(Array.from({ length: 50 }, () => deliver(t, payload, { header })));
    assert.deepEqual(
      answers.map((r) => r.statusCode),
      Array(50).fill(200),
    );
    const outcomes = answers.map((r) => r.json().outcome).sort();
    assert.deepEqual(outcomes, ['applied', ...Array(49).fill('duplicate')]);
    const row = await billingRow(t.deps.db, user.id);
    assert.equal(row.status, 'active');
    assert.equal(row.state_at?.getTime(), e.created * 1000);
    const claim = await eventRow(e.id);
    assert.equal(claim?.outcome, 'applied');
    assert.equal(claim?.attempts, 1);
    assert.equal(claim?.user_id, user.id);
    assert.deepEqual(await mailsFor(user.id), ['payment_recovered'], 'one recovery mail, not 50');
  });

  it('records a failed apply, answers 500 so it is redelivered, lists it, and applies the redelivery', async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const taken = await subscriber('active');
    const user = await createVerifiedUser(t.deps.db);
    await insertBillingRow(t.deps.db, user.id, {
      status: 'trialing',
      trialEndsAt: new Date(Date.now() + 86_400_000),
    });
    // The session's customer is already another account's: the apply violates customer_id's uniqueness.
    const sub = newId('sub');
    const e = event(
      'checkout.session.completed',
      checkoutSessionObject({ userId: user.id, customer: taken.customer, subscription: sub }),
      ago(MIN),
    );
    const failed = await deliver(t, e);
    assert.equal(failed.statusCode, 500);
    assert.equal(failed.json().error, 'billing_event_failed');
    assert.doesNotMatch(failed.body, /unique|constraint|billing_accounts/, 'no internals in the answer');
    const row = await billingRow(t.deps.db, user.id);
    assert.equal(row.subscription_id, null, 'the apply rolled back');
    assert.equal(row.status, 'trialing');
    const claim = await eventRow(e.id);
    assert.equal(claim?.outcome, 'failed');
    assert.match(claim?.error ?? '', /unique/);

    const list = await t.app.inject({
      method: 'GET',
      url: '/api/admin/billing/failures',
      headers: admin.auth,
    });
    assert.equal(list.statusCode, 200);
    assert.ok(
      list.json().data.some((f: { id: string }) => f.id === e.id),
      list.body,
    );
    const summary = await t.app.inject({ method: 'GET', url: '/api/admin/billing', headers: admin.auth });
    assert.ok(summary.json().failed_events >= 1);
    const notAdmin = await t.app.inject({
      method: 'GET',
      url: '/api/admin/billing/failures',
      headers: user.auth,
    });
    assert.equal(notAdmin.statusCode, 403);

    // A second failing redelivery counts its attempt; after the conflict is resolved, the next applies.
    const firstFailure = (await eventRow(e.id))?.received_at;
    assert.equal((await deliver(t, e)).statusCode, 500);
    const second = await eventRow(e.id);
    assert.equal(second?.attempts, 2);
    assert.ok(
      second && firstFailure && second.received_at > firstFailure,
      'received_at is the last failed delivery',
    );
    await t.deps.db
      .updateTable('billing_accounts')
      .set({ customer_id: null })
      .where('user_id', '=', taken.user.id)
      .execute();
    const redelivered = await deliver(t, e);
    assert.equal(redelivered.statusCode, 200, redelivered.body);
    assert.equal(redelivered.json().outcome, 'applied');
    const applied = await billingRow(t.deps.db, user.id);
    assert.equal(applied.subscription_id, sub);
    assert.equal(applied.customer_id, taken.customer);
    assert.equal(applied.status, 'active', 'a paid checkout starts the subscription');
    const done = await eventRow(e.id);
    assert.equal(done?.outcome, 'applied');
    assert.equal(done?.attempts, 3);
    assert.equal(done?.error, null);
    const after = await t.app.inject({
      method: 'GET',
      url: '/api/admin/billing/failures',
      headers: admin.auth,
    });
    assert.ok(!after.json().data.some((f: { id: string }) => f.id === e.id), 'no longer listed once applied');
    assert.equal((await deliver(t, e)).json().outcome, 'duplicate');
  });

  it('answers 200 and applies the state when the lifecycle mail cannot be enqueued', async () => {
    const { user, sub, customer } = await subscriber('active');
    const e = event(
      'customer.subscription.deleted',
      subscriptionObject({ id: sub, customer, status: 'canceled' }),
      ago(MIN),
    );
    await sql`ALTER FUNCTION graphile_worker.add_job RENAME TO add_job_gone`.execute(t.deps.db);
    try {
      const res = await deliver(t, e);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().outcome, 'applied');
    } finally {
      await sql`ALTER FUNCTION graphile_worker.add_job_gone RENAME TO add_job`.execute(t.deps.db);
    }
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'canceled');
    assert.equal((await eventRow(e.id))?.outcome, 'applied');
    assert.deepEqual(await mailsFor(user.id), []);
    assert.ok(t.logs.some((l) => l.includes('billing mail not enqueued') && l.includes(user.id)));
  });

  it('claims and ignores an event type it does not handle', async () => {
    const e = event('customer.created', { id: newId('cus'), object: 'customer' }, ago(MIN));
    const res = await deliver(t, e);
    assert.deepEqual(res.json(), { received: true, outcome: 'ignored' });
    assert.equal((await eventRow(e.id))?.outcome, 'ignored');
    assert.equal((await deliver(t, e)).json().outcome, 'duplicate');
  });
});

describe('the billing webhook: order and the subscription of record', () => {
  it('keeps the newest state when customer.subscription.updated events arrive out of order', async () => {
    const { user, sub, customer } = await subscriber('active', ago(60 * MIN));
    const periodEnd = new Date(Date.now() + 40 * 86_400_000);
    const older = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'past_due' }),
      ago(20 * MIN),
    );
    const newer = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'active', periodEnd, cancelAtPeriodEnd: true }),
      ago(10 * MIN),
    );
    assert.equal((await deliver(t, newer)).json().outcome, 'applied');
    const late = await deliver(t, older);
    assert.equal(late.statusCode, 200);
    assert.equal(late.json().outcome, 'ignored');
    const row = await billingRow(t.deps.db, user.id);
    assert.equal(row.status, 'active');
    assert.equal(row.cancel_at_period_end, true);
    assert.equal(row.current_period_end?.getTime(), seconds(periodEnd) * 1000);
    assert.equal(row.state_at?.getTime(), newer.created * 1000);
    // In order, the same two events end at the newer one too.
    const inOrder = await subscriber('active', ago(60 * MIN));
    const a = event(
      'customer.subscription.updated',
      subscriptionObject({ id: inOrder.sub, customer: inOrder.customer, status: 'past_due' }),
      ago(20 * MIN),
    );
    const b = event(
      'customer.subscription.updated',
      subscriptionObject({ id: inOrder.sub, customer: inOrder.customer, status: 'active' }),
      ago(10 * MIN),
    );
    await deliver(t, a);
    await deliver(t, b);
    assert.equal((await billingRow(t.deps.db, inOrder.user.id)).status, 'active');
    // A late invoice event older than the state held changes nothing either.
    const lateFailure = event(
      'invoice.payment_failed',
      invoiceObject({ subscription: sub, customer }),
      ago(15 * MIN),
    );
    assert.equal((await deliver(t, lateFailure)).json().outcome, 'ignored');
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'active');
  });

  it('never touches an account for an event of another subscription, even of its own customer', async () => {
    const { user, sub, customer } = await subscriber('active');
    const before = await billingRow(t.deps.db, user.id);
    const other = newId('sub');
    for (const e of [
      event(
        'customer.subscription.updated',
        subscriptionObject({ id: other, customer, status: 'past_due' }),
        ago(MIN),
      ),
      event(
        'customer.subscription.deleted',
        subscriptionObject({ id: other, customer, status: 'canceled' }),
        ago(MIN),
      ),
      event('invoice.payment_failed', invoiceObject({ subscription: other, customer }), ago(MIN)),
      event(
        'checkout.session.completed',
        checkoutSessionObject({ userId: user.id, customer, subscription: other }),
        ago(MIN),
      ),
    ]) {
      const res = await deliver(t, e);
      assert.equal(res.statusCode, 200, e.type);
      assert.equal(res.json().outcome, 'ignored', e.type);
    }
    assert.deepEqual(await billingRow(t.deps.db, user.id), before);
    assert.equal(before.subscription_id, sub);
    assert.deepEqual(await mailsFor(user.id), []);
  });

  it('takes the subscription of a checkout as the record, then follows its events', async () => {
    const user = await createVerifiedUser(t.deps.db);
    await insertBillingRow(t.deps.db, user.id, {
      status: 'trialing',
      trialEndsAt: new Date(Date.now() + 86_400_000),
    });
    const sub = newId('sub');
    const customer = newId('cus');
    const unknown = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'past_due' }),
      ago(30 * MIN),
    );
    assert.equal((await deliver(t, unknown)).json().outcome, 'ignored', 'no account has it yet');
    const checkout = event(
      'checkout.session.completed',
      checkoutSessionObject({ userId: user.id, customer, subscription: sub }),
      ago(20 * MIN),
    );
    assert.equal((await deliver(t, checkout)).json().outcome, 'applied');
    let row = await billingRow(t.deps.db, user.id);
    assert.equal(row.subscription_id, sub);
    assert.equal(row.customer_id, customer);
    assert.equal(row.status, 'active');
    const update = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'past_due' }),
      ago(10 * MIN),
    );
    assert.equal((await deliver(t, update)).json().outcome, 'applied');
    row = await billingRow(t.deps.db, user.id);
    assert.equal(row.status, 'past_due');
  });

  it("adopts a new subscription of the account's customer once the old one is canceled", async () => {
    const { user, sub, customer } = await subscriber('active', ago(60 * MIN));
    const newer = newId('sub');
    const early = event(
      'customer.subscription.created',
      subscriptionObject({ id: newer, customer, status: 'active' }),
      ago(40 * MIN),
    );
    assert.equal((await deliver(t, early)).json().outcome, 'ignored', 'the live record is never replaced');
    await deliver(
      t,
      event(
        'customer.subscription.deleted',
        subscriptionObject({ id: sub, customer, status: 'canceled' }),
        ago(30 * MIN),
      ),
    );
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'canceled');
    const created = event(
      'customer.subscription.created',
      subscriptionObject({ id: newer, customer, status: 'active' }),
      ago(20 * MIN),
    );
    assert.equal((await deliver(t, created)).json().outcome, 'applied');
    const row = await billingRow(t.deps.db, user.id);
    assert.equal(row.subscription_id, newer);
    assert.equal(row.status, 'active');
    const oldLate = event(
      'customer.subscription.updated',
      subscriptionObject({ id: sub, customer, status: 'canceled' }),
      ago(10 * MIN),
    );
    assert.equal(
      (await deliver(t, oldLate)).json().outcome,
      'ignored',
      'the old subscription is no longer the record',
    );
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'active');
    assert.deepEqual(await mailsFor(user.id), ['subscription_canceled']);
  });

  it('writes status on invoice.paid only on dunning recovery', async () => {
    const active = await subscriber('active');
    const before = await billingRow(t.deps.db, active.user.id);
    const paid = event(
      'invoice.paid',
      invoiceObject({ subscription: active.sub, customer: active.customer, status: 'paid' }),
      ago(MIN),
    );
    assert.equal((await deliver(t, paid)).json().outcome, 'ignored');
    assert.deepEqual(
      await billingRow(t.deps.db, active.user.id),
      before,
      'an ordinary renewal writes nothing',
    );

    const canceled = await subscriber('canceled');
    const paidLate = event(
      'invoice.paid',
      invoiceObject({ subscription: canceled.sub, customer: canceled.customer, status: 'paid' }),
      ago(MIN),
    );
    await deliver(t, paidLate);
    assert.equal(
      (await billingRow(t.deps.db, canceled.user.id)).status,
      'canceled',
      'never revives a canceled account',
    );

    const dunning = await subscriber('active');
    const failed = event(
      'invoice.payment_failed',
      invoiceObject({ subscription: dunning.sub, customer: dunning.customer }),
      ago(3 * MIN),
    );
    await deliver(t, failed);
    assert.equal((await billingRow(t.deps.db, dunning.user.id)).status, 'past_due');
    const action = event(
      'invoice.payment_action_required',
      invoiceObject({ subscription: dunning.sub, customer: dunning.customer }),
      ago(2 * MIN),
    );
    assert.equal((await deliver(t, action)).json().outcome, 'applied');
    assert.equal(
      (await billingRow(t.deps.db, dunning.user.id)).status,
      'past_due',
      'action required changes no status',
    );
    const recovered = event(
      'invoice.paid',
      invoiceObject({ subscription: dunning.sub, customer: dunning.customer, status: 'paid' }),
      ago(MIN),
    );
    assert.equal((await deliver(t, recovered)).json().outcome, 'applied');
    assert.equal((await billingRow(t.deps.db, dunning.user.id)).status, 'active');
    assert.deepEqual(await mailsFor(dunning.user.id), [
      'payment_failed',
      'payment_action_required',
      'payment_recovered',
    ]);
  });

  it('never changes the status of a comped account', async () => {
    const { user, sub, customer } = await subscriber('comped');
    await deliver(
      t,
      event(
        'customer.subscription.updated',
        subscriptionObject({ id: sub, customer, status: 'past_due' }),
        ago(2 * MIN),
      ),
    );
    await deliver(
      t,
      event('invoice.payment_failed', invoiceObject({ subscription: sub, customer }), ago(MIN)),
    );
    assert.equal((await billingRow(t.deps.db, user.id)).status, 'comped');
    assert.deepEqual(await mailsFor(user.id), []);
  });
});

describe('the admin revenue figure', () => {
  it('is active subscriptions × BILLING_PRICE_MONTHLY_CENTS, and null when the price is unset', async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const res = await t.app.inject({ method: 'GET', url: '/api/admin/billing', headers: admin.auth });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    const { rows } = await sql<{
      n: string;
    }>`SELECT count(*) AS n FROM billing_accounts WHERE status = 'active'`.execute(t.deps.db);
    const active = Number(rows[0]?.n);
    assert.ok(active > 0);
    assert.equal(body.active_subscriptions, active);
    assert.equal(body.price_monthly_cents, 1900);
    assert.equal(body.revenue_monthly_cents, active * 1900);
    assert.equal(body.accounts_by_status.active, active);
    const audits = await t.deps.db
      .selectFrom('audit_events')
      .select(['type', 'metadata'])
      .where('tenant_id', '=', admin.id)
      .where('type', '=', 'admin.billing.read')
      .execute();
    assert.equal(audits.length, 1, "the read is audited in the admin's own log");

    const unpriced = await buildTestApp({
      database: t.database,
      env: { ...env, BILLING_PRICE_MONTHLY_CENTS: '' },
    });
    try {
      const r = await unpriced.app.inject({ method: 'GET', url: '/api/admin/billing', headers: admin.auth });
      assert.equal(r.json().revenue_monthly_cents, null);
      assert.equal(r.json().price_monthly_cents, null);
      assert.equal(r.json().active_subscriptions, active);
    } finally {
      await unpriced.app.close();
    }
  });
});

describe('billing off', () => {
  it('has no webhook or billing admin route', async () => {
    const off = await buildTestApp({ database: t.database, env: { ...env, BILLING_ENABLED: 'false' } });
    try {
      const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
      const e = event('invoice.paid', {}, new Date());
      assert.equal((await deliver(off, e)).statusCode, 404);
      assert.equal(
        (await off.app.inject({ method: 'GET', url: '/api/admin/billing', headers: admin.auth })).statusCode,
        404,
      );
      assert.ok(!off.app.routeTable.some((r) => r.url.includes('billing')));
    } finally {
      await off.app.close();
    }
  });
});
