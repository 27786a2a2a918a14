// The account deletion form on /account in real Chromium against the real server: the
// button waits for the typed address, a wrong password is refused beside its field, and a
// deletion signs the browser out with a notice and leaves no account behind.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

describe('account deletion on /account', () => {
  it('deletes the signed-in account after the email and password are typed, then signs out', async () => {
    const email = `leaving-${Date.now()}@example.com`;
    const password = 'correct horse battery staple';
    const page = await c.page();
    await page.goto(c.url('/sign-up'));
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();

    await page.goto(c.url('/account'));
    const form = page.getByRole('group', { name: 'Delete account' });
    await form.waitFor();
    await c.axe(page, 'account with the deletion form');
    const button = form.getByRole('button', { name: 'Delete my account' });
    await form.getByLabel(/to confirm/).fill('someone-else@example.com');
    assert.equal(await button.isDisabled(), true, 'the button waits for the account address');
    await form.getByLabel(/to confirm/).fill(email.toUpperCase());
    await form.getByLabel('Current password').fill('not the password at all');
    await button.click();
    await form.getByText('is incorrect').waitFor();

    await form.getByLabel('Current password').fill(password);
    await button.click();
    await page.getByRole('heading', { name: 'Sign in to Paddock' }).waitFor();
    await page.getByText('Your account and everything in it have been deleted.').waitFor();
    const row = await c.h.deps.db
      .selectFrom('users')
      .select('id')
      .where('email', '=', email)
      .executeTakeFirst();
    assert.equal(row, undefined);
    c.assertNoSecret(password);
    assert.deepEqual(c.pageProblems(), []);
  });
});
