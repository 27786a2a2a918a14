// Issue 41, deliverable 4 in the console, in real Chromium against the real server, PostgreSQL
// and sandboxd (scripted runtime), the fake git host (push over https) and the loopback fake of
// GitHub's REST API: "Push branch" opens a dialog prefilled from GET …/push; a refusal (a
// protected branch) is shown as the server words it; a push with "Open a pull request" shows the
// pull request's link, which the conversation's facts then list. axe clean; screenshots in
// docs/screenshots/.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';
import { type FakeGitHub, startFakeGitHub } from '../../server/test/helpers/fake-github.ts';
import { type FakeGitHost, startFakeGitHost } from '../../server/test/helpers/git-server.ts';

const PASSWORD = 'a long and lovely passphrase';
const SHOTS = join(import.meta.dirname, '../../../docs/screenshots');

let c: ConsoleHarness;
let githost: FakeGitHost;
let github: FakeGitHub;
let listener: net.Server;
let port = 0;

before(async () => {
  listener = net.createServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as net.AddressInfo).port;
  githost = startFakeGitHost(listener);
  github = await startFakeGitHub();
  c = await startConsoleHarness({
    sandboxdEnv: { SANDBOXD_SERVICE_ROUTES: `git.test=127.0.0.1:${port}` },
    env: { GIT_HOST_API_URLS: `git.test=${github.url}` },
    engine: { gitEnv: { GIT_SSL_NO_VERIFY: 'true' } },
  });
});
after(async () => {
  await c?.close();
  githost?.close();
  listener?.close();
  await github?.close();
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

describe('Push branch in the console', () => {
  it('pushes from a prefilled dialog, shows a refusal as worded, then the pull request link; axe clean', async () => {
    const page = await c.page({ width: 1440, height: 1000 });
    await page.goto(c.url('/sign-up'));
    await page.getByLabel('Email').fill(`push-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();

    const path = `acme/shop-${randomBytes(3).toString('hex')}`;
    const token = `ghp_${randomBytes(16).toString('hex')}`;
    githost.addRepo(path, [{ files: { 'README.md': '# shop\n', 'cart.js': 'export const total = 0;\n' } }], {
      token,
    });
    githost.protect(path, ['main']);
    github.addRepo(path, {
      token,
      branchExists: (b) => {
        try {
          githost.git(path, ['rev-parse', '--verify', '--quiet', `refs/heads/${b}`]);
          return true;
        } catch {
          return false;
        }
      },
    });
    const env = await apiAs(page, 'POST', '/api/environments', {
      name: 'shop-env',
      repos: [{ url: `https://git.test:${port}/${path}.git`, token_secret: 'GITHUB_TOKEN' }],
    });
    await apiAs(page, 'POST', `/api/environments/${env.id}/secrets`, { key: 'GITHUB_TOKEN', value: token });
    // A key for the agent's provider, so the page has no missing-key warning (the runtime is scripted).
    await apiAs(page, 'POST', `/api/environments/${env.id}/secrets`, {
      key: 'ANTHROPIC_API_KEY',
      value: `sk-ant-${randomBytes(12).toString('hex')}`,
    });
    const agent = await apiAs(page, 'POST', '/api/agents', {
      name: 'shop-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      environment_id: env.id,
    });
    const conv = await apiAs(page, 'POST', '/api/conversations', {
      agent_id: agent.id,
      prompt:
        '# Add a discount to the cart total\ncd shop-* && echo "export const discount = 0.1;" >> cart.js',
    });
    const deadline = Date.now() + 120_000;
    for (;;) {
      const now = await apiAs(page, 'GET', `/api/conversations/${conv.id}`);
      if (now.status === 'idle') break;
      assert.ok(Date.now() < deadline && now.status !== 'failed', JSON.stringify(now));
      await new Promise((r) => setTimeout(r, 200));
    }

    await page.goto(c.url(`/conversations/${conv.id}`));
    await page.getByRole('button', { name: 'Push branch' }).click();
    const dialog = page.getByRole('dialog', { name: 'Push a branch' });
    const branch = dialog.getByLabel('Branch');
    await branch.waitFor();
    const defaultBranch = `paddock/${conv.id.replace(/-/g, '').slice(-8)}-1`;
    assert.equal(await branch.inputValue(), defaultBranch);
    assert.match(
      await dialog.getByLabel('Commit message').inputValue(),
      /^Add a discount to the cart total\n/,
    );
    assert.equal(await dialog.getByLabel('Open a pull request').isChecked(), true);
    await c.axe(page, 'push dialog');
    await page.screenshot({ path: join(SHOTS, 'push-dialog.png') });

    // A protected branch: the server's words, in the dialog.
    await branch.fill('main');
    await dialog.getByRole('button', { name: 'Push and open pull request' }).click();
    const alert = dialog.getByRole('alert');
    await alert
      .getByText(/refused the push to main .*push to a new branch instead/)
      .waitFor({ timeout: 60_000 });
    assert.match((await alert.textContent()) ?? '', /GH006: Protected branch update failed/);
    await c.axe(page, 'push dialog with a refusal');

    await branch.fill('feature/discount');
    await dialog.getByRole('button', { name: 'Push and open pull request' }).click();
    const link = dialog.getByRole('link', { name: 'pull request #1' });
    await link.waitFor({ timeout: 60_000 });
    const pull = github.pulls(path)[0];
    assert.ok(pull);
    assert.equal(await link.getAttribute('href'), pull.html_url);
    assert.equal(pull.head, 'feature/discount');
    assert.equal(pull.title, 'Add a discount to the cart total');
    assert.match(githost.git(path, ['show', 'feature/discount:cart.js']), /discount = 0\.1/);
    await c.axe(page, 'push dialog after the push');
    await page.screenshot({ path: join(SHOTS, 'push-dialog-done.png') });
    await dialog.getByRole('button', { name: 'Done' }).click();

    // The conversation lists it.
    const facts = page.locator('.conv-pulls');
    await facts.getByRole('link', { name: '#1' }).waitFor({ timeout: 10_000 });
    assert.equal(await facts.getByRole('link', { name: '#1' }).getAttribute('href'), pull.html_url);
    c.assertNoSecret(token);
    assert.deepEqual(c.pageProblems(), []);
  });
});
