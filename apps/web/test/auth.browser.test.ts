// The auth pages in real Chromium against the real server: sign up, sign out, sign in,
// the registration-closed page and the flash of the email-verification link.
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

describe('auth pages', () => {
  it('signs up through the form (mail off: straight in), signs out, and signs back in', async () => {
    const page = await c.page();
    await page.goto(c.url('/'));
    await page.getByRole('heading', { name: /Run AI coding agents/ }).waitFor();
    await page.getByRole('link', { name: 'llms.txt' }).waitFor();
    // No legal variables, no billing: no legal links and no price.
    assert.equal(await page.getByRole('link', { name: 'Terms' }).count(), 0);
    assert.equal(await page.getByText('per month').count(), 0);
    await c.axe(page, 'home');
    await page.getByRole('link', { name: 'Create an account' }).first().click();
    await page.getByRole('heading', { name: 'Create your Paddock account' }).waitFor();
    await c.axe(page, 'sign up');
    const email = `ada-${Date.now()}@example.com`;
    const password = 'correct horse battery staple';
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    await c.axe(page, 'dashboard');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Paddock' }).waitFor();
    await page.getByText('You are signed out.').waitFor();
    await c.axe(page, 'sign in');

    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('wrong password entirely');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('invalid email or password').waitFor();
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();

    // The password never comes back in any response the browser received.
    c.assertNoSecret(password);
    assert.deepEqual(c.pageProblems(), []);
  });

  it('sends a signed-out visitor of a console page to sign in, and back there afterwards', async () => {
    const res = await c.h.api(null, 'POST', '/api/auth/register', {
      email: `bob-${Date.now()}@example.com`,
      password: 'another long passphrase',
    });
    assert.equal(res.status, 201);
    const page = await c.page({ width: 390, height: 844 });
    await page.goto(c.url('/conversations'));
    await page.getByRole('heading', { name: 'Sign in to Paddock' }).waitFor();
    assert.match(page.url(), /\/sign-in\?next=%2Fconversations$/);
    await page.getByLabel('Email').fill(res.body.user.email);
    await page.getByLabel('Password').fill('another long passphrase');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(c.url('/conversations'));
    assert.deepEqual(c.pageProblems(), []);
  });

  it('shows the outcome of an email link the server redirected with ?flash=', async () => {
    const page = await c.page();
    await page.goto(c.url('/auth/verify?token=not-a-real-token'));
    await page.getByText('That confirmation link is invalid or has expired').waitFor();
    await c.axe(page, 'verification link landing');
  });

  it('asks for a reset link and says the same thing whether or not the account exists', async () => {
    const page = await c.page();
    await page.goto(c.url('/sign-in'));
    await page.getByRole('link', { name: 'Forgot your password?' }).click();
    await page.getByLabel('Email').fill('nobody@example.com');
    await page.getByRole('button', { name: 'Send reset link' }).click();
    await page.getByText('If an account exists for that address').waitFor();
    await c.axe(page, 'forgot password');
  });
});

describe('registration closed, billing on, legal pages configured', () => {
  let closed: ConsoleHarness;
  before(async () => {
    closed = await startConsoleHarness({
      env: {
        REGISTRATION_ENABLED: 'false',
        BILLING_ENABLED: 'true',
        BILLING_PRICE_MONTHLY_CENTS: '1900',
        LEGAL_ENTITY: 'Example Ltd',
        LEGAL_CONTACT_EMAIL: 'legal@example.com',
        LEGAL_JURISDICTION: 'England and Wales',
        LEGAL_EFFECTIVE_DATE: '2026-01-01',
      },
    });
  });

  it('shows the price and the legal links on the home page, and the legal pages behind them', async () => {
    const page = await closed.page();
    await page.goto(closed.url('/'));
    await page.getByText('$19.00').waitFor();
    assert.equal(await page.getByRole('link', { name: 'Create an account' }).count(), 0);
    await page.getByRole('link', { name: 'Terms' }).click();
    await page.getByRole('heading', { name: 'Terms of service' }).waitFor();
    await page.getByText('operated by Example Ltd').waitFor();
    await closed.axe(page, 'terms');
  });
  after(async () => {
    await closed?.close();
  });

  it('says registration is closed instead of showing a form that cannot work', async () => {
    const page = await closed.page();
    await page.goto(closed.url('/sign-up'));
    await page.getByRole('heading', { name: 'Registration is closed' }).waitFor();
    await closed.axe(page, 'registration closed');
    await page.goto(closed.url('/sign-in'));
    await page.getByRole('heading', { name: 'Sign in to Paddock' }).waitFor();
    await page.locator('.auth-links[aria-busy="false"]').waitFor(); // the server answered
    assert.equal(await page.getByRole('link', { name: 'Create an account' }).count(), 0);
  });
});
