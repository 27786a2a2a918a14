// The admin's untracked sandboxes page in real Chromium against the real server: the sandbox
// reaper's report (untracked_sandboxes) reached from the Users page, and refused to a non-admin.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

const PASSWORD = 'correct horse battery staple';

async function signedIn(email: string): Promise<Page> {
  const res = await c.h.api(null, 'POST', '/api/auth/register', { email, password: PASSWORD });
  assert.equal(res.status, 201);
  const page = await c.page();
  await page.goto(c.url('/sign-in'));
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
  return page;
}

describe('the untracked sandboxes page', () => {
  it('shows an admin what the reaper reported; a non-admin finds no such page', async () => {
    const stamp = Date.now();
    const seen = new Date(Date.now() - 3 * 3_600_000);
    await c.h.deps.db
      .insertInto('untracked_sandboxes')
      .values({ name: `left-over-${stamp}`, first_seen_at: seen, last_seen_at: new Date() })
      .execute();

    const plain = await signedIn(`plain-${stamp}@example.com`);
    await plain.goto(c.url('/admin/sandboxes'));
    await plain.getByRole('heading', { name: /not found/i }).waitFor();

    const adminEmail = `admin-${stamp}@example.com`;
    const page = await signedIn(adminEmail);
    await c.h.deps.db.updateTable('users').set({ is_admin: true }).where('email', '=', adminEmail).execute();
    await page.reload();
    await page.getByRole('link', { name: 'Admin' }).click();
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await page.getByRole('link', { name: 'Untracked sandboxes' }).click();
    await page.getByRole('heading', { name: 'Untracked sandboxes' }).waitFor();
    const row = page.getByRole('row', { name: new RegExp(`left-over-${stamp}`) });
    await row.waitFor();
    await row.getByText('3 h ago').waitFor();
    await c.axe(page, 'admin untracked sandboxes');
    assert.deepEqual(c.pageProblems(), []);
  });
});
