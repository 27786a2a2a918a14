// Issue 37, finding 3 and the conversation page of finding 7, in real Chromium against the real
// server, PostgreSQL and sandboxd (scripted runtime: the prompt is the turn's shell script; a line
// `PADDOCK_EVENT=<json>` is a turn event, as a CLI's JSON lines are): a turn that fails for want of
// a key says so where the turn and its stage show their status, linking the Account page, and the
// page warns before; a failed setup says its reason once; one status word while provisioning; an
// ended conversation is not "live"; a session id once per turn; a long tool call says it runs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { noCredentialMessage } from '../../server/src/conversations/turns/runtimes/common.ts';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

const PASSWORD = 'a long and lovely passphrase';
/** What the adapters' credential check prints before the CLI would start (common.ts). */
const SENTENCE = noCredentialMessage('Anthropic', 'anthropic', 'ANTHROPIC_API_KEY');

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

async function apiAs(page: Page, method: 'POST' | 'GET' | 'PUT', path: string, body?: unknown) {
  const res = await page.request.fetch(c.url(path), {
    method,
    headers: { origin: c.origin, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { data: JSON.stringify(body) }),
  });
  assert.ok(res.ok(), `${method} ${path} answered ${res.status()}: ${await res.text()}`);
  return res.json();
}

async function signUp(page: Page, who: string) {
  await page.goto(c.url('/sign-up'));
  await page.getByLabel('Email').fill(`${who}-${Date.now()}@example.com`);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
}

/** The prompt of a scripted turn that prints one turn event. */
const event = (e: Record<string, unknown>) => `echo 'PADDOCK_EVENT=${JSON.stringify(e)}'`;

/**
 * A new account with a claude agent and no key anywhere, and a conversation whose turn fails as
 * the adapter's credential check does (common.ts): its sentence on stderr, exit 2. The runtime
 * names its session twice, at the turn's start and end, as Claude Code does.
 */
async function keylessConversation(who: string): Promise<Page> {
  const page = await c.page({ width: 1440, height: 1600 });
  await signUp(page, who);
  const agent = await apiAs(page, 'POST', '/api/agents', {
    name: 'keyless-agent',
    model: 'anthropic/claude-sonnet-4-5',
    runtime: 'claude',
  });
  const conv = await apiAs(page, 'POST', '/api/conversations', {
    agent_id: agent.id,
    prompt: [
      'echo PADDOCK_SESSION=sess-1',
      event({ kind: 'text', text: 'Looking for a key.' }),
      `printf '%s\\n' '${SENTENCE.replaceAll("'", "'\\''")}' >&2`,
      'echo PADDOCK_SESSION=sess-1',
      'exit 2',
    ].join('; '),
  });
  await page.goto(c.url(`/conversations/${conv.id}`));
  return page;
}

/** A new account whose agent's environment has a setup script that takes 5 s, then fails (exit 7). */
async function failingSetup(who: string): Promise<Page> {
  const page = await c.page({ width: 1440, height: 1600 });
  await signUp(page, who);
  const env = await apiAs(page, 'POST', '/api/environments', {
    name: 'broken-env',
    setup_script: 'echo preparing; sleep 5; echo "no such tool" >&2; exit 7',
  });
  const agent = await apiAs(page, 'POST', '/api/agents', {
    name: 'setup-agent',
    model: 'anthropic/claude-sonnet-4-5',
    runtime: 'claude',
    environment_id: env.id,
  });
  const conv = await apiAs(page, 'POST', '/api/conversations', { agent_id: agent.id, prompt: 'true' });
  await page.goto(c.url(`/conversations/${conv.id}`));
  return page;
}

describe("a conversation's reasons and statuses in the console", () => {
  it('a turn without a key says why beside its status and its stage, linking the Account page', async () => {
    const page = await keylessConversation('reason');
    const turn = page.locator('.turn', { hasText: '#1' });
    await turn.getByText('failed', { exact: true }).waitFor({ timeout: 60_000 });
    const reason = turn.locator('.turn-error');
    await reason
      .getByText(/no Anthropic credential: set one with `paddock credentials set anthropic`/)
      .waitFor();
    assert.match((await reason.textContent()) ?? '', /\(the runtime exited with code 2\)$/);
    assert.equal(
      await reason.getByRole('link', { name: 'the Account page' }).getAttribute('href'),
      '/account',
    );
    const stage = page.locator('.tl-item', { hasText: 'Turn 1' });
    await stage.getByText(/no Anthropic credential/).waitFor();
    assert.equal(await stage.getByRole('link', { name: 'the Account page' }).count(), 1);
    await c.axe(page, 'conversation with a keyless turn');
    assert.deepEqual(c.pageProblems(), []);
  });

  it("warns on the page when the agent's provider has no key, until one is set", async () => {
    const page = await keylessConversation('warning');
    const warning = page.getByRole('note').filter({ hasText: 'No Anthropic key for this agent' });
    await warning.waitFor({ timeout: 30_000 });
    assert.equal(
      await warning.getByRole('link', { name: 'the Account page' }).getAttribute('href'),
      '/account',
    );
    await page
      .locator('.turn', { hasText: '#1' })
      .getByText('failed', { exact: true })
      .waitFor({ timeout: 60_000 });
    await c.axe(page, 'conversation with the missing-key warning');
    await apiAs(page, 'PUT', '/api/account/inference-credentials/anthropic', {
      api_key: 'sk-ant-0123456789abc',
    });
    await page.reload();
    await page.locator('.turn', { hasText: '#1' }).waitFor();
    await page.locator('.tl-item', { hasText: 'Turn 1' }).waitFor();
    assert.equal(await page.getByText('No Anthropic key for this agent').count(), 0);
    assert.deepEqual(c.pageProblems(), []);
  });

  it('shows a session id once per turn, though the runtime names it twice', async () => {
    const page = await keylessConversation('session');
    await page
      .locator('.turn', { hasText: '#1' })
      .getByText('failed', { exact: true })
      .waitFor({ timeout: 60_000 });
    await page.getByRole('tab', { name: /Transcript/ }).click();
    await page.locator('.tx-text', { hasText: 'Looking for a key.' }).waitFor();
    assert.equal(await page.locator('.tx-meta', { hasText: 'session sess-1' }).count(), 1);
    assert.deepEqual(c.pageProblems(), []);
  });

  it('a tool call that runs long says it still runs until its result comes', async () => {
    const page = await c.page({ width: 1440, height: 1600 });
    await signUp(page, 'tool');
    const agent = await apiAs(page, 'POST', '/api/agents', {
      name: 'tool-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
    });
    const conv = await apiAs(page, 'POST', '/api/conversations', {
      agent_id: agent.id,
      prompt: [
        event({ kind: 'tool_call', id: 't1', name: 'Bash', input: { command: 'make all' } }),
        'sleep 4',
        event({ kind: 'tool_result', id: 't1', is_error: false, output: 'built' }),
        event({ kind: 'text', text: 'All built.' }),
      ].join('; '),
    });
    await page.goto(c.url(`/conversations/${conv.id}`));
    await page.getByRole('tab', { name: /Transcript/ }).click();
    const running = page.locator('.tx-tool', { hasText: 'make all' }).getByRole('status');
    await running
      .getByText(/still running \([\d.]+ m?s\): its output comes when it ends/)
      .waitFor({ timeout: 60_000 });
    await c.axe(page, 'conversation with a running tool');
    await page.locator('.tx-text', { hasText: 'All built.' }).waitFor({ timeout: 30_000 });
    assert.equal(await page.locator('.tx-running').count(), 0);
    assert.deepEqual(c.pageProblems(), []);
  });

  it('one status word while provisioning: the header says so, nothing else names a status of its own', async () => {
    const page = await failingSetup('provisioning');
    await page.locator('.tl-item', { hasText: 'Setup script' }).waitFor({ timeout: 60_000 });
    await page.locator('.page-header').getByText('provisioning', { exact: true }).waitFor();
    const words = (await page.locator('.page-header, .conv-facts, .turns').allTextContents()).join(' ');
    for (const word of ['pending', 'starting', 'queued'])
      assert.ok(!new RegExp(`\\b${word}\\b`).test(words), `"${word}" shown while provisioning: ${words}`);
    await page.locator('.turn', { hasText: '#1' }).getByText('waits for the sandbox').waitFor();
    await c.axe(page, 'conversation while provisioning');
    assert.deepEqual(c.pageProblems(), []);
  });

  it('a failed setup says its reason once, in the banner, which does not point "above"', async () => {
    const page = await failingSetup('reason-once');
    await page.locator('.page-header').getByText('failed', { exact: true }).waitFor({ timeout: 60_000 });
    const banner = page.getByRole('alert');
    await banner.getByText(/the setup script failed \(exit 7\)/).waitFor();
    assert.doesNotMatch((await banner.textContent()) ?? '', /above/);
    await page.locator('.tl-item', { hasText: 'Setup script' }).getByText('failed').waitFor();
    await page.locator('.turn', { hasText: '#1' }).getByText('failed', { exact: true }).waitFor();
    const body = (await page.locator('main').textContent()) ?? '';
    assert.equal(body.split('the setup script failed (exit 7)').length - 1, 1, 'the reason is said once');
    await page.getByText('This conversation failed: start a new one.').waitFor();
    // The raw output is one click from the banner.
    await page.getByRole('tab', { name: /Transcript/ }).click();
    await banner.getByRole('button', { name: 'Show the raw output' }).click();
    await page.locator('#panel-raw .term-line', { hasText: 'no such tool' }).waitFor();
    await c.axe(page, 'conversation with a failed setup');
    assert.deepEqual(c.pageProblems(), []);
  });

  it('the feed of a failed conversation says "ended", never a green "live"', async () => {
    const page = await failingSetup('ended');
    await page.locator('.page-header').getByText('failed', { exact: true }).waitFor({ timeout: 60_000 });
    await page.locator('.live-dot').getByText('ended', { exact: true }).waitFor();
    assert.equal(await page.locator('.live-live').count(), 0);
    assert.deepEqual(c.pageProblems(), []);
  });
});
