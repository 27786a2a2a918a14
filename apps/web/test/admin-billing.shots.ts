// The admin billing page's screenshots for docs/screenshots/ (admin-billing-*.png), in real
// Chromium against the real server with billing on and realistic data: a few paying and
// trialing accounts and one webhook event whose apply failed. `npm run screenshots` runs it.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import {
  event,
  insertBillingRow,
  newId,
  sign,
  WEBHOOK_SECRET,
} from '../../server/test/helpers/billing-events.ts';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';
import { createVerifiedUser } from '../../server/test/helpers/factories.ts';

const OUT = join(import.meta.dirname, '../../../docs/screenshots');
const VIEWPORTS = [
  { width: 1440, height: 900 },
  { width: 390, height: 844 },
];
const PASSWORD = 'correct horse battery staple';

let c: ConsoleHarness;
before(async () => {
  mkdirSync(OUT, { recursive: true });
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

it('admin billing page', async () => {
  const db = c.h.deps.db;
  const statuses = [
    ...Array(12).fill('active'),
    ...Array(5).fill('trialing'),
    'past_due',
    'past_due',
    'canceled',
    'comped',
  ] as const;
  for (const status of statuses) {
    const u = await createVerifiedUser(db);
    await insertBillingRow(db, u.id, { status, customerId: newId('cus'), subscriptionId: newId('sub') });
  }
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
  const payload = JSON.stringify(
    event(
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
    ),
  );
  await fetch(`${c.h.url}/api/billing/webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': sign(payload) },
    body: payload,
  });

  const owner = 'ada@example.com';
  await c.h.api(null, 'POST', '/api/auth/register', { email: owner, password: PASSWORD });
  await db.updateTable('users').set({ is_admin: true }).where('email', '=', owner).execute();
  for (const viewport of VIEWPORTS) {
    const page = await c.page(viewport);
    await page.goto(c.url('/sign-in'));
    await page.getByLabel('Email').fill(owner);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    await page.goto(c.url('/admin/billing'));
    await page.getByRole('row', { name: /checkout\.session\.completed/ }).waitFor();
    await page.screenshot({ path: join(OUT, `admin-billing-${viewport.width}x${viewport.height}.png`) });
  }
});
