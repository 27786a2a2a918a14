// The admin's billing page in real Chromium against the real server (billing on): the revenue
// figure (active subscriptions × BILLING_PRICE_MONTHLY_CENTS), accounts per status and the
// webhook failures the server recorded, reached from the Users page; refused to a non-admin;
// axe clean at desktop and phone widths.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  event,
  insertBillingRow,
  newId,
  sign,
  WEBHOOK_SECRET,
} from '../../server/test/helpers/billing-events.ts';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';
import { createVerifiedUser } from '../../server/test/helpers/factories.ts';

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness({
    env: {
      BILLING_ENABLED: 'true',
      BILLING_WEBHOOK_SECRET: WEBHOOK_SECRET,
      BILLING_PRICE_MONTHLY_CENTS: '1900',
    },
  });
});
after(async () => {
  await c?.close();
});

const PASSWORD = 'correct horse battery staple';

async function signedIn(email: string, viewport?: { width: number; height: number }): Promise<Page> {
  const res = await c.h.api(null, 'POST', '/api/auth/register', { email, password: PASSWORD });
  assert.equal(res.status, 201);
  const page = await c.page(viewport);
  await page.goto(c.url('/sign-in'));
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
  return page;
}

describe('the admin billing page', () => {
  it('shows the revenue figure and the webhook failures to an admin; a non-admin finds no such page', async () => {
    const db = c.h.deps.db;
    await db.deleteFrom('billing_accounts').execute();
    for (const status of ['active', 'active', 'active', 'past_due', 'trialing', 'comped'] as const) {
      const u = await createVerifiedUser(db);
      await insertBillingRow(db, u.id, { status, customerId: newId('cus'), subscriptionId: newId('sub') });
    }
    // A real failure: a checkout whose customer already belongs to another account.
    const taken = await db
      .selectFrom('billing_accounts')
      .select('customer_id')
      .where('status', '=', 'comped')
      .executeTakeFirstOrThrow();
    const buyer = await createVerifiedUser(db);
    await insertBillingRow(db, buyer.id, {
      status: 'trialing',
      trialEndsAt: new Date(Date.now() + 86_400_000),
    });
    const failing = event(
      'checkout.session.completed',
      {
        id: newId('cs'),
        object: 'checkout.session',
        mode: 'subscription',
        payment_status: 'paid',
        client_reference_id: buyer.id,
        customer: taken.customer_id,
        subscription: newId('sub'),
      },
      new Date(),
    );
    const payload = JSON.stringify(failing);
    const answer = await fetch(`${c.h.url}/api/billing/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': sign(payload) },
      body: payload,
    });
    assert.equal(answer.status, 500, 'recorded as a failure');

    const stamp = Date.now();
    const plain = await signedIn(`plain-${stamp}@example.com`);
    await plain.goto(c.url('/admin/billing'));
    await plain.getByRole('heading', { name: /not found/i }).waitFor();

    const adminEmail = `admin-${stamp}@example.com`;
    const page = await signedIn(adminEmail);
    await db.updateTable('users').set({ is_admin: true }).where('email', '=', adminEmail).execute();
    await page.reload();
    await page.getByRole('link', { name: 'Admin' }).click();
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await page.getByRole('link', { name: 'Billing' }).click();
    await page.getByRole('heading', { name: 'Billing', exact: true }).waitFor();
    await page.getByText(/\$57\.00 \(3 active × \$19\.00\)/).waitFor();
    const row = page.getByRole('row', { name: new RegExp(failing.id) });
    await row.waitFor();
    await row.getByText('checkout.session.completed').waitFor();
    await row.getByText(/unique/).waitFor();
    const shot = await page.screenshot({ fullPage: true });
    assert.equal(shot.subarray(1, 4).toString(), 'PNG');
    await c.axe(page, 'admin billing');

    const phone = await c.page({ width: 390, height: 844 });
    await phone.context().addCookies(await page.context().cookies());
    await phone.goto(c.url('/admin/billing'));
    await phone.getByRole('heading', { name: 'Billing', exact: true }).waitFor();
    await phone.getByRole('row', { name: new RegExp(failing.id) }).waitFor();
    await c.axe(phone, 'admin billing (phone)');
    assert.deepEqual(c.pageProblems(), []);
  });
});
