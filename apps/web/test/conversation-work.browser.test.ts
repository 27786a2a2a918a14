// Issue 41, the console's Files and Terminal tabs, in real Chromium against the real server,
// PostgreSQL and sandboxd (scripted runtime: the prompt is the turn's shell script). The Files
// tab lists the sandbox's home (never .paddock), opens a directory and shows a file's text with
// its secret redacted; the Terminal tab opens a shell over the WebSocket (the session cookie from
// the console's origin), runs `echo`, and shows the output. Screenshots into docs/screenshots/,
// axe on each tab.
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

const PASSWORD = 'a long and lovely passphrase';
const SECRET = 'web-Secret-7f6e5d4c3b2a';
const OUT = resolve(import.meta.dirname, '../../../docs/screenshots');

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

async function apiAs(page: Page, method: 'POST' | 'GET', path: string, body?: unknown) {
  const res = await page.request.fetch(c.url(path), {
    method,
    headers: { origin: c.origin, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { data: JSON.stringify(body) }),
  });
  assert.ok(res.ok(), `${method} ${path} answered ${res.status()}: ${await res.text()}`);
  return res.json();
}

async function conversationWithFiles(): Promise<{ page: Page; id: string }> {
  const page = await c.page({ width: 1440, height: 1000 });
  await page.goto(c.url('/sign-up'));
  await page.getByLabel('Email').fill(`work-${Date.now()}@example.com`);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
  const environment = await apiAs(page, 'POST', '/api/environments', { name: 'work-env' });
  await apiAs(page, 'POST', `/api/environments/${environment.id}/secrets`, {
    key: 'WEB_SECRET',
    value: SECRET,
  });
  const agent = await apiAs(page, 'POST', '/api/agents', {
    name: 'work-agent',
    model: 'anthropic/claude-sonnet-4-5',
    runtime: 'claude',
    environment_id: environment.id,
  });
  const script = [
    'mkdir -p app/src',
    "printf 'export const answer = 42;\\n' > app/src/answer.ts",
    'printf "API_TOKEN=%s\\n" "$WEB_SECRET" > app/.env.local',
    "printf '# app\\nA small project.\\n' > app/README.md",
    'echo written',
  ].join(' && ');
  const conv = await apiAs(page, 'POST', '/api/conversations', { agent_id: agent.id, prompt: script });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const now = await apiAs(page, 'GET', `/api/conversations/${conv.id}`);
    if (now.status === 'idle') break;
    assert.ok(Date.now() < deadline, `the conversation did not become idle: ${now.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await page.goto(c.url(`/conversations/${conv.id}`));
  return { page, id: conv.id };
}

describe('the conversation page: Files and Terminal', () => {
  it('the Files tab lists the home, opens a directory and shows a file redacted', async () => {
    const { page } = await conversationWithFiles();
    await page.getByRole('tab', { name: 'Files' }).click();
    const tree = page.getByRole('list', { name: 'Files' });
    await tree.getByRole('button', { name: /app/ }).first().click();
    await page.getByRole('button', { name: /\.env\.local/ }).click();
    const content = page.getByRole('region', { name: 'Content of app/.env.local' });
    await content.getByText('API_TOKEN=[REDACTED]').waitFor();
    assert.equal(await page.getByRole('button', { name: /^\s*\.paddock/ }).count(), 0);
    await page.getByRole('button', { name: /src/ }).first().click();
    await page.getByRole('button', { name: /answer\.ts/ }).click();
    await page
      .getByRole('region', { name: 'Content of app/src/answer.ts' })
      .getByText('export const answer = 42;')
      .waitFor();
    await page.screenshot({ path: resolve(OUT, 'conversation-files.png') });
    await c.axe(page, 'conversation: Files tab');
    c.assertNoSecret(SECRET);
  });

  it('the Terminal tab runs a shell in the sandbox: type echo hi, see hi', async () => {
    const { page } = await conversationWithFiles();
    await page.getByRole('tab', { name: 'Terminal' }).click();
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByRole('button', { name: 'Disconnect' }).waitFor();
    await page.locator('.xterm').click();
    await page.keyboard.type('echo hi-$((40+2)) && cat app/.env.local');
    await page.keyboard.press('Enter');
    const rows = page.locator('.xterm-rows');
    await rows.getByText('hi-42', { exact: true }).waitFor({ timeout: 15_000 });
    await rows.getByText('API_TOKEN=[REDACTED]').waitFor();
    await page.screenshot({ path: resolve(OUT, 'conversation-terminal.png') });
    await c.axe(page, 'conversation: Terminal tab');
    await page.keyboard.type('exit 5');
    await page.keyboard.press('Enter');
    await page.getByText('The shell exited with code 5.').waitFor();
    c.assertNoSecret(SECRET);
    assert.deepEqual(c.pageProblems(), []);
  });
});
