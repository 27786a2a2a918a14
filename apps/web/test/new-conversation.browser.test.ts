// The New conversation dialog in real Chromium against the real server (issue 37, finding 7):
// the prompt has the focus when it opens; with several agents and none remembered nothing is
// chosen for the person and starting waits for a choice; the agent a conversation was started
// with is chosen the next time (per browser), until it is deleted.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

const PASSWORD = 'a long and lovely passphrase';

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

/** An API call with the browser's own session cookie (and Origin, as the console sends it). */
async function apiAs(page: Page, method: 'POST' | 'GET' | 'DELETE', path: string, body?: unknown) {
  const res = await page.request.fetch(c.url(path), {
    method,
    headers: { origin: c.origin, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { data: JSON.stringify(body) }),
  });
  assert.ok(res.ok(), `${method} ${path} answered ${res.status()}: ${await res.text()}`);
  return res.status() === 204 ? null : res.json();
}

const hasFocus = async (l: Locator) => (await l.and(l.page().locator(':focus')).count()) === 1;

async function openDialog(page: Page): Promise<Locator> {
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
  await page.keyboard.press('n');
  const dialog = page.getByRole('dialog', { name: 'New conversation' });
  await dialog.waitFor();
  // The agents have loaded once their options are there.
  await dialog.getByRole('option', { name: /zeta-agent/ }).waitFor({ state: 'attached' });
  return dialog;
}

describe('the New conversation dialog', () => {
  it('focuses the prompt, waits for an agent to be chosen, and remembers the one started last', async () => {
    const page = await c.page();
    await page.goto(c.url('/sign-up'));
    await page.getByLabel('Email').fill(`dialog-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    // Alphabetically first is not the one wanted: the old dialog chose it unasked.
    const alpha = await apiAs(page, 'POST', '/api/agents', {
      name: 'alpha-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    const zeta = await apiAs(page, 'POST', '/api/agents', {
      name: 'zeta-agent',
      model: 'openai/gpt-5',
      runtime: 'codex',
    });
    await page.reload();

    let dialog = await openDialog(page);
    const prompt = dialog.getByLabel('Prompt');
    const agent = dialog.getByLabel('Agent');
    assert.ok(await hasFocus(prompt), 'the prompt has the focus, not the close button');
    assert.equal(await agent.inputValue(), '', 'no agent is chosen for the person');
    await dialog.getByText('Which agent runs this prompt?').waitFor();
    await c.axe(page, 'new conversation dialog, no agent chosen');
    await page.keyboard.type('true');
    const dashboard = page.url();
    const start = dialog.getByRole('button', { name: 'Start conversation' });
    assert.ok(await start.isDisabled(), 'starting waits for an agent');
    // Ctrl+Enter without an agent starts nothing and takes the person to the choice.
    await page.keyboard.press('Control+Enter');
    assert.ok(await hasFocus(agent), 'the agent select has the focus');
    assert.equal(page.url(), dashboard, 'still on the dashboard');
    assert.equal((await apiAs(page, 'GET', '/api/conversations')).data.length, 0);

    await agent.selectOption({ label: 'zeta-agent (codex)' });
    await start.click();
    await page.waitForURL(/\/conversations\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').at(-1) ?? '';
    assert.equal((await apiAs(page, 'GET', `/api/conversations/${id}`)).agent_id, zeta.id);

    // The next dialog, also after a reload, has the agent started last, and the prompt focused.
    await page.goto(c.url('/conversations'));
    dialog = await openDialog(page);
    assert.equal(await dialog.getByLabel('Agent').inputValue(), zeta.id);
    assert.ok(await hasFocus(dialog.getByLabel('Prompt')));
    assert.equal(await dialog.getByText('Which agent runs this prompt?').count(), 0);
    await c.axe(page, 'new conversation dialog, agent remembered');
    await page.keyboard.press('Escape');

    // A remembered agent that is gone is not chosen; with one agent left, that one is.
    await apiAs(page, 'DELETE', `/api/conversations/${id}`);
    await apiAs(page, 'DELETE', `/api/agents/${zeta.id}`);
    await apiAs(page, 'POST', '/api/agents', {
      name: 'zeta-agent',
      model: 'openai/gpt-5',
      runtime: 'codex',
    });
    await page.reload();
    dialog = await openDialog(page);
    assert.equal(
      await dialog.getByLabel('Agent').inputValue(),
      '',
      'a new agent of the same name is not the remembered one',
    );
    await page.keyboard.press('Escape');
    await apiAs(page, 'DELETE', `/api/agents/${alpha.id}`);
    assert.deepEqual(c.pageProblems(), []);
  });
});
