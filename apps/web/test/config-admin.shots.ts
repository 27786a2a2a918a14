// The console's screenshots for docs/screenshots/, taken in real Chromium against the real
// server with realistic data. Not part of `npm test` (no `.test.ts`): `npm run screenshots`
// runs it through the test runner, which provides PostgreSQL.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

const OUT = join(import.meta.dirname, '../../../docs/screenshots');
const VIEWPORTS = [
  { width: 1440, height: 900 },
  { width: 390, height: 844 },
];
const PASSWORD = 'correct horse battery staple';

let c: ConsoleHarness;
before(async () => {
  mkdirSync(OUT, { recursive: true });
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

async function signIn(page: Page, email: string) {
  await page.goto(c.url('/sign-in'));
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
}

async function account(email: string, admin = false) {
  await c.h.api(null, 'POST', '/api/auth/register', { email, password: PASSWORD });
  if (admin)
    await c.h.deps.db.updateTable('users').set({ is_admin: true }).where('email', '=', email).execute();
}

it('agent form and admin page', async () => {
  const owner = 'ada@example.com';
  await account(owner, true);
  for (const [email, verify] of [
    ['grace@example.com', true],
    ['linus@example.com', true],
    ['margaret@example.com', false],
  ] as const) {
    await account(email);
    if (!verify) {
      await c.h.deps.db
        .updateTable('users')
        .set({ email_verified_at: null })
        .where('email', '=', email)
        .execute();
    }
  }
  await c.h.deps.db
    .updateTable('users')
    .set({ suspended_at: new Date() })
    .where('email', '=', 'linus@example.com')
    .execute();

  const manifest = {
    resources: [
      {
        kind: 'Environment',
        name: 'web-app',
        spec: {
          env_vars: { NODE_ENV: 'test' },
          packages: { npm: 'typescript@5.9.3' },
          repos: [{ url: 'https://github.com/acme/web-app.git', ref: 'main', token_secret: 'GITHUB_TOKEN' }],
          secrets: { GITHUB_TOKEN: 'ghp_example_token_value' },
        },
      },
      { kind: 'Vault', name: 'production', spec: { secrets: { SENTRY_TOKEN: 'example-sentry-token' } } },
      {
        kind: 'Agent',
        name: 'reviewer',
        spec: {
          model: 'anthropic/claude-sonnet-4-5',
          runtime: 'claude',
          description: 'Reviews pull requests and runs the test suite',
          environment: 'web-app',
          vaults: ['production'],
          system: 'You review pull requests for the web app.\nRun `npm test` before you answer.',
          skills: [{ source: 'acme/review-skills', ref: 'v1.4.0' }],
          mcp_servers: {
            github: {
              command: 'npx',
              args: ['-y', '@modelcontextprotocol/server-github'],
              env: { GITHUB_PERSONAL_ACCESS_TOKEN: '${GITHUB_TOKEN}' },
            },
          },
        },
      },
    ],
  };
  const browser = await c.page();
  await signIn(browser, owner);
  const applied = await browser.evaluate(async (body) => {
    const res = await fetch('/api/apply', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return (await res.json()) as { results: { kind: string; id: string }[] };
  }, manifest);
  const agentId = applied.results.find((r) => r.kind === 'Agent')!.id;

  for (const viewport of VIEWPORTS) {
    const page = await c.page(viewport);
    await signIn(page, owner);
    const size = `${viewport.width}x${viewport.height}`;
    await page.goto(c.url(`/agents/${agentId}`));
    await page.getByRole('heading', { name: 'Agent reviewer' }).waitFor();
    await page.getByRole('textbox', { name: 'System prompt' }).waitFor();
    await page.screenshot({ path: join(OUT, `agent-form-${size}.png`) });
    await page.goto(c.url('/admin/users'));
    await page.getByRole('row', { name: /margaret@example.com/ }).waitFor();
    await page.screenshot({ path: join(OUT, `admin-users-${size}.png`) });
  }
});
