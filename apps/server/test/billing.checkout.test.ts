// Issue 42 (billing core), through the public API with the official Stripe SDK talking to the
// fake Stripe on loopback (helpers/fake-stripe.ts), real PostgreSQL: the trial clock at
// registration, /api/auth/me's billing fields, checkout and portal with every URL built from
// PUBLIC_URL, comped never offered checkout, a live subscription refused a second one, the
// processor's outage as a visible error while the page renders from local state, account
// deletion canceling the subscription first, and the expire-legacy-trials release task.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { expireLegacyTrialsTask } from '../src/billing/legacy-trials.task.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { type FakeStripe, startFakeStripe } from './helpers/fake-stripe.ts';

const PUBLIC_URL = 'http://paddock.example';
let t: TestApp;
let stripe: FakeStripe;

before(async () => {
  stripe = await startFakeStripe();
  t = await buildTestApp({
    env: {
      PUBLIC_URL,
      BILLING_ENABLED: 'true',
      BILLING_STRIPE_SECRET_KEY: stripe.secretKey,
      BILLING_STRIPE_API_BASE: stripe.url,
      BILLING_PRICE_MONTHLY_CENTS: '900',
      BILLING_TRIAL_DAYS: '10',
    },
  });
});
after(async () => {
  await t.close();
  await stripe.close();
});

async function api(user: TestUser, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) {
  const res = await t.app.inject({
    method,
    url,
    headers: user.auth,
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });
  return { status: res.statusCode, body: res.json() };
}

async function withRow(values: Record<string, unknown>): Promise<TestUser> {
  const user = await createVerifiedUser(t.deps.db);
  await t.deps.db
    .insertInto('billing_accounts')
    .values({ user_id: user.id, status: 'trialing', ...values })
    .execute();
  return user;
}

describe('billing core (BILLING_ENABLED=true, the SDK against the fake Stripe)', () => {
  it('starts a trial clock of BILLING_TRIAL_DAYS at registration, shown by /api/auth/me', async () => {
    const email = `trial-${Date.now()}@example.com`;
    const reg = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email, password: 'a long enough password 1' },
    });
    assert.equal(reg.statusCode, 201, reg.body);
    const row = await t.deps.db
      .selectFrom('billing_accounts')
      .selectAll()
      .where('user_id', '=', reg.json().user.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'trialing');
    assert.equal(row.legacy, false);
    const days = (row.trial_ends_at!.getTime() - Date.now()) / 86400_000;
    assert.ok(days > 9.9 && days <= 10, `trial of ${days} days`);

    const login = await t.app.inject({
      method: 'POST',
      url: '/api/auth/token',
      payload: { email, password: 'a long enough password 1' },
    });
    assert.equal(login.statusCode, 201, login.body);
    const me = await t.app.inject({
      method: 'GET',
      url: '/api/auth/me',
      headers: { authorization: `Bearer ${login.json().key}` },
    });
    assert.equal(me.json().subscription_status, 'trialing');
    assert.equal(me.json().trial_ends_at, row.trial_ends_at!.toISOString());
    assert.equal(me.json().current_period_end, null);
    assert.equal(me.json().cancel_at_period_end, false);
  });

  it('checkout: creates the customer once and a subscription session whose URLs are built from PUBLIC_URL', async () => {
    const user = await withRow({ trial_ends_at: new Date(Date.now() + 5 * 86400_000) });
    const before = stripe.requests.length;
    // A caller's URLs are not part of the body at all: unknown fields are ignored, never used.
    const first = await api(user, 'POST', '/api/billing/checkout', {
      success_url: 'https://evil.example/steal',
      return_url: 'https://evil.example/steal',
    });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.match(first.body.url, /^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/);
    const second = await api(user, 'POST', '/api/billing/checkout');
    assert.equal(second.status, 200);

    const calls = stripe.requests.slice(before);
    const customerCalls = calls.filter((r) => r.path === '/v1/customers');
    assert.equal(customerCalls.length, 1, 'one customer for the account');
    assert.equal(customerCalls[0]!.form.email, user.email);
    assert.equal(customerCalls[0]!.form.metadata.paddock_user_id, user.id);
    const sessions = calls.filter((r) => r.path === '/v1/checkout/sessions');
    assert.equal(sessions.length, 2);
    for (const s of sessions) {
      assert.equal(s.headers.authorization, `Bearer ${stripe.secretKey}`);
      assert.match(String(s.headers['content-type']), /application\/x-www-form-urlencoded/);
      assert.equal(s.form.mode, 'subscription');
      assert.equal(s.form.client_reference_id, user.id);
      assert.equal(s.form.success_url, `${PUBLIC_URL}/account/billing?checkout=success`);
      assert.equal(s.form.cancel_url, `${PUBLIC_URL}/account/billing?checkout=canceled`);
      assert.ok(!s.raw.includes('evil.example'));
      assert.equal(s.form.line_items[0].price_data.unit_amount, '900');
      assert.equal(s.form.line_items[0].price_data.recurring.interval, 'month');
      // The local trial (5 days left) carries over to the processor's subscription.
      const trialEnd = Number(s.form.subscription_data.trial_end);
      assert.ok(Math.abs(trialEnd * 1000 - (Date.now() + 5 * 86400_000)) < 60_000);
    }
    const row = await t.deps.db
      .selectFrom('billing_accounts')
      .select('customer_id')
      .where('user_id', '=', user.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.customer_id, customerCalls[0] && [...stripe.customers.keys()].at(-1));
  });

  it('never offers checkout to a comped account (409 checkout_not_offered; the view says so)', async () => {
    const user = await withRow({ status: 'comped' });
    const before = stripe.requests.length;
    const res = await api(user, 'POST', '/api/billing/checkout');
    assert.equal(res.status, 409);
    assert.equal(res.body.error, 'checkout_not_offered');
    assert.equal(stripe.requests.length, before, 'the processor is not asked');
    const view = await api(user, 'GET', '/api/billing');
    assert.equal(view.body.status, 'comped');
    assert.equal(view.body.checkout_available, false);
  });

  it('refuses a second checkout while the subscription of record is live at the processor (409 subscription_exists)', async () => {
    stripe.putSubscription({ id: 'sub_live_1', customer: 'cus_x', status: 'active' });
    // The local row still says trialing (its webhook not yet here): the processor is asked.
    const user = await withRow({
      customer_id: 'cus_live_1',
      subscription_id: 'sub_live_1',
      trial_ends_at: new Date(Date.now() + 86400_000),
    });
    const res = await api(user, 'POST', '/api/billing/checkout');
    assert.equal(res.status, 409);
    assert.equal(res.body.error, 'subscription_exists');
    // Canceled at the processor: a new checkout is allowed.
    stripe.subscriptions.get('sub_live_1').status = 'canceled';
    stripe.customers.set('cus_live_1', { id: 'cus_live_1', object: 'customer' });
    const again = await api(user, 'POST', '/api/billing/checkout');
    assert.equal(again.status, 200, JSON.stringify(again.body));
  });

  it('opens the billing portal with the return URL built from PUBLIC_URL; 409 without a customer', async () => {
    const none = await withRow({ trial_ends_at: new Date(Date.now() + 86400_000) });
    const refused = await api(none, 'POST', '/api/billing/portal');
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error, 'no_billing_customer');

    stripe.customers.set('cus_portal_1', { id: 'cus_portal_1', object: 'customer' });
    const user = await withRow({
      status: 'active',
      customer_id: 'cus_portal_1',
      subscription_id: 'sub_portal_1',
    });
    const res = await api(user, 'POST', '/api/billing/portal', { return_url: 'https://evil.example' });
    assert.equal(res.status, 200);
    assert.match(res.body.url, /^https:\/\/billing\.stripe\.test\/p\/session\/bps_/);
    const call = stripe.requests.filter((r) => r.path === '/v1/billing_portal/sessions').at(-1)!;
    assert.equal(call.form.customer, 'cus_portal_1');
    assert.equal(call.form.return_url, `${PUBLIC_URL}/account/billing`);
  });

  it('sets cancel at period end at the processor and shows it with the period end', async () => {
    const end = Math.floor(Date.now() / 1000) + 20 * 86400;
    stripe.putSubscription({
      id: 'sub_cancel_1',
      customer: 'cus_c1',
      status: 'active',
      current_period_end: end,
    });
    const user = await withRow({ status: 'active', customer_id: 'cus_c1', subscription_id: 'sub_cancel_1' });
    const res = await api(user, 'POST', '/api/billing/cancel-at-period-end', { cancel_at_period_end: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.cancel_at_period_end, true);
    assert.equal(res.body.current_period_end, new Date(end * 1000).toISOString());
    assert.equal(stripe.subscriptions.get('sub_cancel_1').cancel_at_period_end, true);
    const me = await api(user, 'GET', '/api/auth/me');
    assert.equal(me.body.cancel_at_period_end, true);
    assert.equal(me.body.current_period_end, new Date(end * 1000).toISOString());
  });

  it('shows the processor outage as a visible 503 on checkout and portal while the page renders from local state', async () => {
    stripe.customers.set('cus_out_1', { id: 'cus_out_1', object: 'customer' });
    const user = await withRow({ customer_id: 'cus_out_1', trial_ends_at: new Date(Date.now() + 86400_000) });
    for (const outage of [503, 0]) {
      stripe.outage = outage;
      try {
        const view = await api(user, 'GET', '/api/billing');
        assert.equal(view.status, 200);
        assert.equal(view.body.status, 'trialing');
        for (const path of ['/api/billing/checkout', '/api/billing/portal']) {
          const res = await api(user, 'POST', path);
          assert.equal(res.status, 503, `${path} during outage ${outage}`);
          assert.equal(res.body.error, 'billing_unavailable');
          assert.match(res.body.message, /try again/);
        }
      } finally {
        stripe.outage = null;
      }
    }
    assert.ok(!t.logs.join('').includes(stripe.secretKey), 'the key is in no log line');
  });

  it('boots without BILLING_STRIPE_SECRET_KEY in development; checkout and portal then fail visibly (503 billing_not_configured)', async () => {
    const keyless = await buildTestApp({
      database: t.database,
      env: { BILLING_ENABLED: 'true', BILLING_PRICE_MONTHLY_CENTS: '900' },
    });
    try {
      const user = await withRow({
        customer_id: 'cus_keyless',
        trial_ends_at: new Date(Date.now() + 86400_000),
      });
      const view = await keyless.app.inject({ method: 'GET', url: '/api/billing', headers: user.auth });
      assert.equal(view.statusCode, 200);
      for (const url of ['/api/billing/checkout', '/api/billing/portal']) {
        const res = await keyless.app.inject({ method: 'POST', url, headers: user.auth });
        assert.equal(res.statusCode, 503, url);
        assert.equal(res.json().error, 'billing_not_configured');
        assert.match(res.json().message, /BILLING_STRIPE_SECRET_KEY/);
      }
    } finally {
      await keyless.close();
    }
  });

  it('cancels the subscription at the processor before deleting the account; a processor outage deletes nothing', async () => {
    stripe.putSubscription({ id: 'sub_del_1', customer: 'cus_d1', status: 'active' });
    const user = await withRow({ status: 'active', customer_id: 'cus_d1', subscription_id: 'sub_del_1' });
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    stripe.outage = 503;
    try {
      const refused = await api(admin, 'DELETE', `/api/admin/users/${user.id}`);
      assert.equal(refused.status, 503);
      assert.equal(refused.body.error, 'billing_unavailable');
    } finally {
      stripe.outage = null;
    }
    const still = await t.deps.db
      .selectFrom('users')
      .select('id')
      .where('id', '=', user.id)
      .executeTakeFirst();
    assert.ok(still, 'nothing deleted while the subscription could not be canceled');
    const res = await api(admin, 'DELETE', `/api/admin/users/${user.id}`);
    assert.ok(res.status < 300, JSON.stringify(res.body));
    assert.equal(stripe.subscriptions.get('sub_del_1').status, 'canceled');
    const gone = await t.deps.db
      .selectFrom('users')
      .select('id')
      .where('id', '=', user.id)
      .executeTakeFirst();
    assert.equal(gone, undefined);
  });

  it('task expire-legacy-trials: --dry-run writes nothing; a run starts N-day clocks once; the gate then follows them', async () => {
    await t.deps.db.deleteFrom('users').execute();
    const legacyNoRow = await createVerifiedUser(t.deps.db);
    const legacyRow = await withRow({ legacy: true, trial_ends_at: null });
    const current = await withRow({ trial_ends_at: new Date(Date.now() + 86400_000) });
    const lines: string[] = [];
    const run = (args: string[]) =>
      expireLegacyTrialsTask.run({ deps: t.deps, args, print: (l) => lines.push(l) });

    await run(['--dry-run', '--days', '3']);
    assert.match(lines.at(-1)!, /would start a 3-day trial for 2 legacy account/);
    assert.equal(
      (
        await t.deps.db
          .selectFrom('billing_accounts')
          .select('user_id')
          .where('user_id', '=', legacyNoRow.id)
          .execute()
      ).length,
      0,
    );
    await run(['--days', '3']);
    assert.match(lines.at(-1)!, /started a 3-day trial for 2 legacy account/);
    await run(['--days', '3']);
    assert.match(lines.at(-1)!, /started a 3-day trial for 0 legacy account/);
    for (const u of [legacyNoRow, legacyRow]) {
      const row = await t.deps.db
        .selectFrom('billing_accounts')
        .selectAll()
        .where('user_id', '=', u.id)
        .executeTakeFirstOrThrow();
      assert.equal(row.legacy, true);
      const days = (row.trial_ends_at!.getTime() - Date.now()) / 86400_000;
      assert.ok(days > 2.9 && days <= 3);
    }
    const untouched = await t.deps.db
      .selectFrom('billing_accounts')
      .select('trial_ends_at')
      .where('user_id', '=', current.id)
      .executeTakeFirstOrThrow();
    assert.ok(untouched.trial_ends_at!.getTime() - Date.now() < 1.1 * 86400_000);
    await assert.rejects(run(['--days', 'x']), /--days/);
    await assert.rejects(run(['--force']), /unknown argument/);
  });
});
