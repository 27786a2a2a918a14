// Issue 37, finding 3: an agent whose provider has no key is said where a person can still fix
// it, before a turn fails: the agent form while it is written, and the New conversation dialog
// when that agent is chosen; once the account has the key, neither says it. Real Chromium
// against the real server.
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

async function apiAs(page: Page, method: 'POST' | 'PUT', path: string, body: unknown) {
  const res = await page.request.fetch(c.url(path), {
    method,
    headers: { origin: c.origin, 'content-type': 'application/json' },
    data: JSON.stringify(body),
  });
  assert.ok(res.ok(), `${method} ${path} answered ${res.status()}: ${await res.text()}`);
  return res.json();
}

describe('a missing provider key', () => {
  it('is said in the agent form and in the New conversation dialog, and no longer once the key is set', async () => {
    const page = await c.page();
    await page.goto(c.url('/sign-up'));
    await page.getByLabel('Email').fill(`keyless-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill('a long and lovely passphrase');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();

    // The agent form: the warning appears once the model is one the runtime runs.
    await page.goto(c.url('/agents/new'));
    await page.getByLabel('Name').fill('keyless');
    await page.getByLabel('Model').fill('anthropic/claude-sonnet-4-5');
    const formNote = page.getByRole('note').filter({ hasText: 'No Anthropic key for this agent' });
    await formNote.waitFor();
    assert.match(await formNote.innerText(), /ANTHROPIC_API_KEY/);
    assert.equal(
      await formNote.getByRole('link', { name: 'the Account page' }).getAttribute('href'),
      '/account',
    );
    await c.axe(page, 'agent form, no provider key');

    await apiAs(page, 'POST', '/api/agents', {
      name: 'keyless',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    await page.goto(c.url('/'));
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    await page.keyboard.press('n');
    const dialog = page.getByRole('dialog', { name: 'New conversation' });
    const dialogNote = dialog.getByRole('note').filter({ hasText: 'No Anthropic key for this agent' });
    await dialogNote.waitFor();
    await c.axe(page, 'new conversation dialog, no provider key');
    await dialog.getByRole('button', { name: 'Cancel' }).click();

    // With the account's key set, neither says it.
    await apiAs(page, 'PUT', '/api/account/inference-credentials/anthropic', { api_key: 'sk-ant-test-Kq2' });
    await page.reload();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    await page.keyboard.press('n');
    await dialog.getByLabel('Prompt').waitFor();
    await dialog.getByRole('option', { name: /keyless/ }).waitFor({ state: 'attached' });
    await page.waitForLoadState('networkidle');
    assert.equal(await dialog.getByRole('note').filter({ hasText: 'key for this agent' }).count(), 0);
    await page.goto(c.url('/agents/new'));
    await page.getByLabel('Model').fill('anthropic/claude-sonnet-4-5');
    await page.waitForLoadState('networkidle');
    assert.equal(await page.getByRole('note').filter({ hasText: 'key for this agent' }).count(), 0);
  });
});
