// The usage block of the account page and of the admin's user page in real Chromium against the
// real server, over usage events the database's meter wrote as sandbox and turn rows ended: this
// month's sandbox hours busy and parked, turns, tokens and cost; another account's never shown.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';
import { insertSandboxLife, readyThisMonth } from '../../server/test/helpers/usage-rows.ts';

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

const PASSWORD = 'correct horse battery staple';

async function register(email: string): Promise<string> {
  const res = await c.h.api(null, 'POST', '/api/auth/register', { email, password: PASSWORD });
  assert.equal(res.status, 201);
  return String(res.body.user.id);
}

async function signIn(page: Page, email: string): Promise<void> {
  await page.goto(c.url('/sign-in'));
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
}

/** The usage figures shown (term → value). */
async function figures(page: Page): Promise<Record<string, string>> {
  const list = page.locator('dl').filter({ hasText: 'Sandbox hours busy' });
  await list.waitFor();
  const terms = await list.locator('dt').allInnerTexts();
  const values = await list.locator('dd').allInnerTexts();
  return Object.fromEntries(terms.map((t, i) => [t, values[i] ?? '']));
}

describe('usage on the account page', () => {
  it("shows this month's sandbox hours busy and parked, turns, tokens and cost, per model; another account sees none of it", async () => {
    const stamp = Date.now();
    const email = `usage-${stamp}@example.com`;
    const id = await register(email);
    await insertSandboxLife(c.h.deps.db, id, {
      ready: readyThisMonth(3),
      hours: 3,
      busyMinutes: 45,
      tokens: { input: 12_345, output: 678, costUsd: 0.4321 },
    });
    // Last year: not this month's.
    await insertSandboxLife(c.h.deps.db, id, {
      ready: new Date(Date.UTC(new Date().getUTCFullYear() - 1, 0, 5)),
      hours: 10,
      busyMinutes: 300,
      tokens: { input: 999_999, output: 999_999, costUsd: 99 },
    });

    const page = await c.page();
    await signIn(page, email);
    await page.goto(c.url('/account'));
    await page.getByRole('group', { name: 'Usage this month' }).waitFor();
    const shown = await figures(page);
    assert.deepEqual(shown, {
      'Sandbox hours busy': '0.75 h',
      'Sandbox hours parked': '2.25 h',
      Sandboxes: '1',
      Turns: '1',
      Tokens: '12,345 in · 678 out · 0 cache read',
      Cost: '$0.4321',
    });
    await page.getByRole('table', { name: /per runtime and model/ }).waitFor();
    await c.axe(page, 'account usage');

    const otherEmail = `other-${stamp}@example.com`;
    await register(otherEmail);
    const other = await c.page({ width: 390, height: 844 });
    await signIn(other, otherEmail);
    await other.goto(c.url('/account'));
    await other.getByRole('group', { name: 'Usage this month' }).waitFor();
    const theirs = await figures(other);
    assert.deepEqual(
      [theirs['Sandbox hours busy'], theirs['Turns'], theirs['Cost']],
      ['0.00 h', '0', 'not reported'],
    );
    assert.equal(await other.getByText('12,345').count(), 0);
    assert.deepEqual(c.pageProblems(), []);
  });

  it("shows an admin the account's usage on its user page", async () => {
    const stamp = Date.now();
    const adminEmail = `usage-admin-${stamp}@example.com`;
    const userEmail = `usage-target-${stamp}@example.com`;
    await register(adminEmail);
    const id = await register(userEmail);
    await c.h.deps.db.updateTable('users').set({ is_admin: true }).where('email', '=', adminEmail).execute();
    await insertSandboxLife(c.h.deps.db, id, {
      ready: readyThisMonth(2),
      hours: 2,
      busyMinutes: 60,
      tokens: { input: 4242, output: 17 },
    });
    const page = await c.page();
    await signIn(page, adminEmail);
    await page.goto(c.url(`/admin/users/${id}`));
    await page.getByRole('heading', { name: 'Usage this month' }).waitFor();
    const shown = await figures(page);
    assert.deepEqual(
      [shown['Sandbox hours busy'], shown['Sandbox hours parked'], shown['Tokens'], shown['Cost']],
      ['1.00 h', '1.00 h', '4,242 in · 17 out · 0 cache read', 'not reported'],
    );
    await c.axe(page, 'admin user usage');
    assert.deepEqual(c.pageProblems(), []);
  });
});
