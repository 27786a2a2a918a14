// Issue 11 acceptance, the conversation part, in real Chromium against the real server,
// PostgreSQL and sandboxd (scripted runtime: the prompt is the turn's shell script):
// sign up → environment, vault and agent (through the API with the browser's session, until
// the configuration forms exist) → start a conversation from the `n` dialog → the live log
// reaches done → follow-up → the connection drops and the page reloads mid-turn, and the log
// continues without gaps or repeats → terminate. No secret value reaches the browser; axe
// finds no serious or critical violation on any page of the flow; the CSP holds.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

const ENV_SECRET = 'envsecret-7f3a9c2e1b5d';
const VAULT_SECRET = 'vaultsecret-4e8d1a6b9c0f';
const PASSWORD = 'a long and lovely passphrase';

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

/** An API call with the browser's own session cookie (and Origin, as the console sends it). */
async function apiAs(page: Page, method: 'POST' | 'GET', path: string, body?: unknown) {
  const res = await page.request.fetch(c.url(path), {
    method,
    headers: { origin: c.origin, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { data: JSON.stringify(body) }),
  });
  assert.ok(res.ok(), `${method} ${path} answered ${res.status()}: ${await res.text()}`);
  return res.json();
}

/** Every line of the raw log in the DOM (the page is tall enough to hold the whole log). */
async function rawLines(page: Page): Promise<string[]> {
  return await page.locator('#panel-raw .term-line').allTextContents();
}

/** Waits for a raw-log line that is exactly `text`. */
async function waitForLine(page: Page, text: string, timeout = 60_000) {
  const exact = new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
  await page.locator('#panel-raw .term-line').filter({ hasText: exact }).first().waitFor({ timeout });
}

describe('a conversation in the console', () => {
  it('starts, streams live, takes a follow-up, survives a dropped stream and a reload, and terminates', async () => {
    // Tall, so the windowed log renders every line and the test can read all of them.
    const page = await c.page({ width: 1440, height: 4000 });
    await page.goto(c.url('/sign-up'));
    await page.getByLabel('Email').fill(`grace-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    await page.getByText('No conversations yet').waitFor();
    await c.axe(page, 'empty dashboard');

    const env = await apiAs(page, 'POST', '/api/environments', {
      name: 'web-env',
      env_vars: { GREETING: 'hi' },
    });
    await apiAs(page, 'POST', `/api/environments/${env.id}/secrets`, { key: 'ENV_TOKEN', value: ENV_SECRET });
    const vault = await apiAs(page, 'POST', '/api/vaults', { name: 'web-vault' });
    await apiAs(page, 'POST', `/api/vaults/${vault.id}/secrets`, { key: 'VAULT_TOKEN', value: VAULT_SECRET });
    await apiAs(page, 'POST', '/api/agents', {
      name: 'web-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      environment_id: env.id,
      vault_ids: [vault.id],
    });

    // The dialog opens from anywhere with `n`.
    await page.reload();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    await page.keyboard.press('n');
    const dialog = page.getByRole('dialog', { name: 'New conversation' });
    await dialog.waitFor();
    await dialog.getByLabel('Vault').selectOption({ label: 'web-vault' });
    await dialog
      .getByLabel('Prompt')
      .fill(
        [
          `printf '\\033[32mgreen text\\033[0m\\n'`,
          'for i in $(seq 1 30); do echo "first $i"; done',
          'echo "env $ENV_TOKEN vault $VAULT_TOKEN"',
          'echo first-done',
        ].join('; '),
      );
    await c.axe(page, 'new conversation dialog');
    await dialog.getByRole('button', { name: 'Start conversation' }).click();
    await page.waitForURL(/\/conversations\/[0-9a-f-]{36}$/);
    const conversationUrl = page.url();

    // The live log reaches the end of the turn; its stage is done; the conversation rests idle.
    await waitForLine(page, 'first-done');
    await page.locator('.tl-item', { hasText: 'Turn 1' }).getByText('done').waitFor({ timeout: 30_000 });
    await page.locator('.page-header').getByText('idle', { exact: true }).waitFor({ timeout: 30_000 });
    const green = page.locator('#panel-raw .term-line span', { hasText: 'green text' });
    assert.match((await green.getAttribute('style')) ?? '', /color: var\(--ansi-2\)/);
    const lines1 = await rawLines(page);
    assert.ok(lines1.includes('env [REDACTED] vault [REDACTED]'), 'secrets are redacted in the log');
    assert.deepEqual(
      lines1.filter((l) => l.startsWith('first ')),
      Array.from({ length: 30 }, (_, i) => `first ${i + 1}`),
    );
    await page.locator('.tl-item', { hasText: 'Provision' }).waitFor();
    await c.axe(page, 'conversation (idle)');

    // Follow-up: a slow turn; the connection drops and the page reloads while it runs.
    const prompt = page.getByRole('textbox', { name: 'Follow-up' });
    await prompt.fill('for i in $(seq 1 60); do echo "tick $i"; sleep 0.4; done; echo second-done');
    await page.getByRole('button', { name: 'Send' }).click();
    await waitForLine(page, 'tick 2');
    // The connection drops: EventSource comes back by itself with Last-Event-ID.
    assert.ok(c.dropStreams() >= 1, 'an SSE stream was open');
    const seen = Math.max(...(await rawLines(page)).map((l) => Number(/^tick (\d+)$/.exec(l)?.[1] ?? 0)));
    await waitForLine(page, `tick ${seen + 3}`);
    const resumed = c
      .responses()
      .filter((r) => r.path.includes('/stream') && r.requestHeaders['last-event-id']);
    assert.ok(resumed.length >= 1, 'the browser resumed the stream with Last-Event-ID');
    await page.locator('.page-header').getByText('running', { exact: true }).waitFor();
    // While the turn runs the prompt box says why it is disabled.
    await page.getByText('A turn is running').waitFor();
    assert.equal(await prompt.isDisabled(), true);
    await c.axe(page, 'conversation (running)');
    // A reload mid-turn replays the log and follows on.
    await waitForLine(page, `tick ${seen + 5}`);
    assert.ok(!(await rawLines(page)).includes('second-done'), 'the reload happens mid-turn');
    await page.reload();
    assert.equal(page.url(), conversationUrl);
    await waitForLine(page, 'second-done');

    const lines2 = await rawLines(page);
    assert.deepEqual(
      lines2.filter((l) => l.startsWith('tick ')),
      Array.from({ length: 60 }, (_, i) => `tick ${i + 1}`),
      'every tick exactly once, in order',
    );
    assert.equal(lines2.filter((l) => l === 'first-done').length, 1);
    await page.locator('.tl-item', { hasText: 'Turn 2' }).getByText('done').waitFor({ timeout: 30_000 });
    await page.locator('.turn', { hasText: '#2' }).getByText('succeeded').waitFor();

    // Terminate, confirmed in a dialog; then the prompt box explains itself.
    await page.getByRole('button', { name: 'Terminate' }).first().click();
    const confirm = page.getByRole('dialog', { name: 'Terminate this conversation?' });
    await c.axe(page, 'terminate dialog');
    await confirm.getByRole('button', { name: 'Terminate' }).click();
    await page.locator('.page-header').getByText('terminated', { exact: true }).waitFor({ timeout: 30_000 });
    await page.getByText('This conversation is terminated').waitFor();
    await c.axe(page, 'conversation (terminated)');

    // Back on the dashboard: the conversation is listed with its status and agent.
    await page.keyboard.press('g');
    await page.keyboard.press('c');
    await page.waitForURL(c.url('/conversations'));
    const row = page.locator('.conv-row').first();
    await row.getByText('terminated').waitFor();
    await row.getByText('web-agent').waitFor();
    await c.axe(page, 'dashboard');

    for (const secret of [ENV_SECRET, VAULT_SECRET, PASSWORD]) c.assertNoSecret(secret);
    assert.ok(
      c.responses().some((r) => r.contentType.startsWith('text/event-stream')),
      'the recorded responses include the SSE stream',
    );
    assert.deepEqual(c.pageProblems(), []);
  });

  it("shows a conversation's sub-conversations and the conversation that started it, with links", async () => {
    const page = await c.page({ width: 1440, height: 1200 });
    await page.goto(c.url('/sign-up'));
    await page.getByLabel('Email').fill(`ada-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    const me = await apiAs(page, 'GET', '/api/auth/me');
    const agent = await apiAs(page, 'POST', '/api/agents', {
      name: 'tree-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    const parent = await apiAs(page, 'POST', '/api/conversations', {
      agent_id: agent.id,
      prompt: '# The orchestrator\ntrue',
    });
    // Once provisioned (which mints the sandbox's key, revoking any before it), the parent's
    // sandbox starts a child with a key of its own, as an agent in it would.
    for (
      let tries = 0;
      (await apiAs(page, 'GET', `/api/conversations/${parent.id}`)).status !== 'idle';
      tries++
    ) {
      assert.ok(tries < 200, 'the parent conversation comes to rest');
      await new Promise((r) => setTimeout(r, 100));
    }
    const key = await c.h.deps.apiKeys.mintConversationKey(me.id, parent.id);
    const started = await fetch(c.url('/api/conversations'), {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: agent.id, prompt: '# A worker\ntrue' }),
    });
    assert.equal(started.status, 201, await started.clone().text());
    const child = (await started.json()) as { id: string };

    await page.goto(c.url(`/conversations/${parent.id}`));
    const children = page.locator('.conv-children');
    await children.getByRole('link', { name: 'A worker' }).waitFor();
    await c.axe(page, 'conversation with a sub-conversation');
    await children.getByRole('link', { name: 'A worker' }).click();
    await page.waitForURL(c.url(`/conversations/${child.id}`));
    await page.getByRole('heading', { name: 'A worker' }).waitFor();
    const startedBy = page.locator('.conv-facts div', { hasText: 'Started by' });
    await startedBy.getByRole('link', { name: 'The orchestrator' }).click();
    await page.waitForURL(c.url(`/conversations/${parent.id}`));
    await page.getByRole('heading', { name: 'The orchestrator' }).waitFor();
    assert.equal(await page.locator('.conv-facts div', { hasText: 'Started by' }).count(), 0);
    assert.deepEqual(c.pageProblems(), []);
  });
});
