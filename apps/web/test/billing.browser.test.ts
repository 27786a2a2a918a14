// /account/billing in real Chromium against the real server (BILLING_ENABLED=true), the Stripe
// SDK talking to the fake Stripe on loopback: a new account's trial, dates and price; the
// processor's outage shown as a visible error on the button that met it while the page keeps
// rendering from local state; checkout sending the browser to the processor's hosted page; an
// active subscription's portal and cancel at period end. axe finds no serious or critical
// violation; a screenshot of each state is taken (kept in BILLING_SHOTS_DIR when set).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';
import { type FakeStripe, startFakeStripe } from '../../server/test/helpers/fake-stripe.ts';

let c: ConsoleHarness;
let stripe: FakeStripe;
let shots: string;
before(async () => {
  stripe = await startFakeStripe();
  // BILLING_SHOTS_DIR keeps the screenshots somewhere to look at; otherwise a temp dir.
  shots = process.env['BILLING_SHOTS_DIR'] ?? mkdtempSync(join(tmpdir(), 'paddock-billing-shots-'));
  c = await startConsoleHarness({
    env: {
      BILLING_ENABLED: 'true',
      BILLING_STRIPE_SECRET_KEY: stripe.secretKey,
      BILLING_STRIPE_API_BASE: stripe.url,
      BILLING_PRICE_MONTHLY_CENTS: '1900',
    },
  });
});
after(async () => {
  await c?.close();
  await stripe?.close();
  if (process.env['BILLING_SHOTS_DIR'] === undefined) rmSync(shots, { recursive: true, force: true });
});

const PASSWORD = 'correct horse battery staple';

describe('the billing page', () => {
  it('shows the trial, the outage as an error, sends checkout to the processor, and manages an active subscription', async () => {
    const email = `billing-${Date.now()}@example.com`;
    const registered = await c.h.api(null, 'POST', '/api/auth/register', { email, password: PASSWORD });
    assert.equal(registered.status, 201);
    const userId = (registered.body as { user: { id: string } }).user.id;
    const page = await c.page();
    await page.goto(c.url('/sign-in'));
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();

    await page.goto(c.url('/account/security'));
    await page.getByRole('link', { name: 'Billing' }).click();
    await page.getByRole('heading', { name: 'Billing' }).waitFor();
    await page.getByText('You are on a trial.').waitFor();
    assert.equal(await page.locator('dt:has-text("Status") + dd').textContent(), 'Trial');
    assert.ok(await page.locator('dt:has-text("Trial ends") + dd').isVisible());
    assert.equal(await page.locator('dt:has-text("Price") + dd').textContent(), '$19.00 per month');
    await c.axe(page, 'billing, trial');
    await page.screenshot({ path: join(shots, 'billing-trial.png'), fullPage: true });
    assert.ok(statSync(join(shots, 'billing-trial.png')).size > 1000);

    // The processor is down: the button's error is visible, the page still shows the trial.
    stripe.outage = 503;
    try {
      await page.getByRole('button', { name: 'Subscribe' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      assert.match((await alert.textContent()) ?? '', /payment processor could not be reached.*try again/);
      assert.equal(await page.locator('dt:has-text("Status") + dd').textContent(), 'Trial');
      await c.axe(page, 'billing, processor down');
      await page.screenshot({ path: join(shots, 'billing-outage.png'), fullPage: true });
    } finally {
      stripe.outage = null;
    }

    // Checkout: the browser goes to the processor's hosted page (answered here: no internet).
    await page.route('https://checkout.stripe.test/**', (route) =>
      route.fulfill({ contentType: 'text/html', body: '<title>Checkout</title><h1>Fake checkout</h1>' }),
    );
    await page.getByRole('button', { name: 'Subscribe' }).click();
    await page.waitForURL(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/);
    const session = [...stripe.checkoutSessions.values()].at(-1);
    assert.equal(session.client_reference_id, userId);
    assert.equal(session.success_url, `${c.origin}/account/billing?checkout=success`);

    // The webhooks made it active (written here as they would); back from checkout.
    const end = Math.floor(Date.now() / 1000) + 30 * 86400;
    const customer = session.customer as string;
    stripe.putSubscription({ id: 'sub_browser_1', customer, status: 'active', current_period_end: end });
    await c.h.deps.db
      .updateTable('billing_accounts')
      .set({ status: 'active', subscription_id: 'sub_browser_1', current_period_end: new Date(end * 1000) })
      .where('user_id', '=', userId)
      .execute();
    await page.goto(c.url('/account/billing?checkout=success'));
    await page.getByText('the payment processor confirmed your checkout').waitFor();
    assert.equal(await page.locator('dt:has-text("Status") + dd').textContent(), 'Active');
    assert.equal(
      await page.getByRole('button', { name: 'Subscribe' }).count(),
      0,
      'no second checkout offered',
    );
    assert.equal(await page.locator('dt:has-text("Cancel at period end") + dd').textContent(), 'No');
    await page.getByRole('button', { name: 'Cancel at period end' }).click();
    await page.getByRole('button', { name: 'Keep my subscription' }).waitFor();
    assert.equal(await page.locator('dt:has-text("Cancel at period end") + dd').textContent(), 'Yes');
    assert.ok(await page.locator('dt:has-text("Ends on") + dd').isVisible());
    assert.equal(stripe.subscriptions.get('sub_browser_1').cancel_at_period_end, true);
    await c.axe(page, 'billing, active, canceling at period end');
    await page.screenshot({ path: join(shots, 'billing-active.png'), fullPage: true });

    await page.route('https://billing.stripe.test/**', (route) =>
      route.fulfill({ contentType: 'text/html', body: '<title>Portal</title><h1>Fake portal</h1>' }),
    );
    await page.getByRole('button', { name: 'Manage payment and invoices' }).click();
    await page.waitForURL(/^https:\/\/billing\.stripe\.test\/p\/session\/bps_/);
  });
});
