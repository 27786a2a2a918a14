// The Changes tab (issue 41) in real Chromium against the real server, PostgreSQL and sandboxd
// (scripted runtime) with an environment that clones a repository from a fake git host over
// https: a turn edits it; the tab lists the files with their stats, shows a file's diff
// highlighted, unified and split, filters by turn, follows a running turn live; no secret reaches
// the browser; axe is clean. Screenshots: docs/screenshots/changes-*.png.
import assert from 'node:assert/strict';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';
import { type FakeGitHost, startFakeGitHost } from '../../server/test/helpers/git-server.ts';

const OUT = join(import.meta.dirname, '../../../docs/screenshots');
const SECRET = 'vaultsecret-changes-5d2e8a1f';
const PASSWORD = 'a long and lovely passphrase';

let c: ConsoleHarness;
let git: FakeGitHost;
let gitServer: net.Server;
let repoUrl: string;

before(async () => {
  gitServer = net.createServer();
  await new Promise<void>((resolve) => gitServer.listen(0, '127.0.0.1', resolve));
  const address = gitServer.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  git = startFakeGitHost(gitServer);
  git.addRepo('acme/web', [
    {
      files: {
        'README.md': '# web\n',
        'src/greet.ts': [
          '// Greets someone.',
          'export function greet(name: string): string {',
          "  return 'Hello, ' + name;",
          '}',
          '',
        ].join('\n'),
        'old-name.txt': 'renamed by the agent\n',
      },
    },
  ]);
  repoUrl = `https://git.test:${port}/acme/web.git`;
  c = await startConsoleHarness({
    sandboxdEnv: { SANDBOXD_SERVICE_ROUTES: `git.test=127.0.0.1:${port}` },
    engine: { gitEnv: { GIT_SSL_NO_VERIFY: 'true' } },
  });
});
after(async () => {
  await c?.close();
  git?.close();
  gitServer?.close();
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

async function waitForTurn(page: Page, id: string, seq: number) {
  for (let i = 0; i < 600; i++) {
    const { data } = await apiAs(page, 'GET', `/api/conversations/${id}/turns`);
    const turn = data.find((t: { seq: number }) => t.seq === seq);
    if (turn && !['queued', 'running'].includes(turn.status)) return turn;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`turn ${seq} did not end`);
}

const TURN_1 = [
  'set -e',
  'cd web',
  "cat > src/greet.ts <<'EOF'",
  '// Greets someone, politely.',
  'export function greet(name: string): string {',
  '  const greeting = `Hello, ${name}!`;',
  '  return greeting;',
  '}',
  'EOF',
  'git mv old-name.txt new-name.txt',
  'echo "token=$VAULT_TOKEN" > .env.local',
  'printf "\\000\\001" > logo.bin',
].join('\n');

describe('the Changes tab', () => {
  it('lists the changed files, shows a highlighted diff unified and split, filters by turn, follows a turn live', async () => {
    const page = await c.page({ width: 1440, height: 900 });
    await page.goto(c.url('/sign-up'));
    await page.getByLabel('Email').fill(`ada-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();

    const env = await apiAs(page, 'POST', '/api/environments', {
      name: 'web-env',
      repos: [{ url: repoUrl }],
    });
    const vault = await apiAs(page, 'POST', '/api/vaults', { name: 'web-vault' });
    await apiAs(page, 'POST', `/api/vaults/${vault.id}/secrets`, { key: 'VAULT_TOKEN', value: SECRET });
    const agent = await apiAs(page, 'POST', '/api/agents', {
      name: 'web-agent',
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      environment_id: env.id,
      vault_ids: [vault.id],
    });
    const conv = await apiAs(page, 'POST', '/api/conversations', {
      agent_id: agent.id,
      vault_id: vault.id,
      prompt: TURN_1,
    });
    const turn1 = await waitForTurn(page, conv.id, 1);
    assert.equal(turn1.status, 'succeeded', turn1.error ?? '');

    await page.goto(c.url(`/conversations/${conv.id}`));
    await page.getByRole('tab', { name: 'Changes' }).click();
    const files = page.getByRole('navigation', { name: 'Changed files' });
    await files.getByRole('button', { name: /greet\.ts/ }).waitFor({ timeout: 30_000 });
    assert.deepEqual((await files.locator('.changes-path').allTextContents()).sort(), [
      '.env.local',
      'logo.bin',
      'new-name.txt',
      'src/greet.ts',
    ]);
    await page.getByRole('status').filter({ hasText: '4 files changed' }).waitFor();
    // Getting the work out from here: the Changes tab carries the Push branch button too.
    await page.locator('#panel-changes').getByRole('button', { name: 'Push branch' }).waitFor();
    await files.getByRole('button', { name: /greet\.ts/ }).click();
    const diff = page.getByRole('table', { name: 'Changes to src/greet.ts' });
    await diff.waitFor();
    const added = await diff.locator('td.diff-code.diff-add').allTextContents();
    assert.deepEqual(added, [
      '// Greets someone, politely.',
      '  const greeting = `Hello, ${name}!`;',
      '  return greeting;',
    ]);
    assert.ok((await diff.locator('.hljs-keyword').count()) > 0, 'the TypeScript is highlighted');
    await c.axe(page, 'changes (unified)');
    await page.screenshot({ path: join(OUT, 'changes-1440x900.png') });

    await page.getByRole('button', { name: 'Split' }).click();
    const split = page.getByRole('table', { name: 'Changes to src/greet.ts, old and new side by side' });
    await split.waitFor();
    // The removed line sits beside the line that replaced it.
    const pair = split.locator('tr', { hasText: "return 'Hello, ' + name;" });
    assert.match((await pair.textContent()) ?? '', /const greeting = `Hello, \$\{name\}!`;/);
    await c.axe(page, 'changes (split)');
    await page.screenshot({ path: join(OUT, 'changes-split-1440x900.png') });

    // The secret file: redacted. The binary: listed, not shown.
    await page.getByRole('button', { name: 'Unified' }).click();
    await files.getByRole('button', { name: /\.env\.local/ }).click();
    await page.getByRole('table', { name: 'Changes to .env.local' }).getByText('token=[REDACTED]').waitFor();
    await files.getByRole('button', { name: /logo\.bin/ }).click();
    await page.getByText('Binary file: not shown.').waitFor();

    // Live: a running turn's edits appear without a reload.
    await apiAs(page, 'POST', `/api/conversations/${conv.id}/prompts`, {
      prompt: 'cd web && echo live >> README.md && sleep 8',
    });
    await files.getByRole('button', { name: /README\.md/ }).waitFor({ timeout: 20_000 });
    await waitForTurn(page, conv.id, 2);

    // Per turn: turn 2 changed README.md only.
    await page
      .getByLabel('Show')
      .selectOption({ label: 'Turn 2: cd web && echo live >> README.md && sleep 8' });
    await page.getByRole('status').filter({ hasText: '1 file changed' }).waitFor({ timeout: 20_000 });
    assert.deepEqual(await files.locator('.changes-path').allTextContents(), ['README.md']);
    await page
      .getByRole('table', { name: 'Changes to README.md' })
      .getByText('live', { exact: true })
      .waitFor();
    await c.axe(page, 'changes (turn 2)');

    c.assertNoSecret(SECRET);
    assert.deepEqual(c.pageProblems(), []);
  });
});
