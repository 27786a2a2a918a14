// Screenshots for docs/screenshots/ (`npm run screenshots` runs every apps/web/test/*.shots.ts): the console at 1440×900 and 390×844 —
// the dashboard and a live conversation — against the real server, PostgreSQL and sandboxd
// (run through the test runner, which provides the database). Look at them after a UI change.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

const OUT = resolve(import.meta.dirname, '../../../docs/screenshots');
const SIZES = [
  { name: '1440x900', width: 1440, height: 900 },
  { name: '390x844', width: 390, height: 844 },
] as const;

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

async function api(page: Page, path: string, body: unknown) {
  const res = await page.request.post(c.url(path), {
    headers: { origin: c.origin, 'content-type': 'application/json' },
    data: JSON.stringify(body),
  });
  if (!res.ok()) throw new Error(`${path} answered ${res.status()}: ${await res.text()}`);
  return res.json();
}

it('takes the screenshots', async () => {
  mkdirSync(OUT, { recursive: true });
  const page = await c.page();
  await page.goto(c.url('/sign-up'));
  await page.getByLabel('Email').fill('ada@example.com');
  await page.getByLabel('Password').fill('a long and lovely passphrase');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();

  const env = await api(page, '/api/environments', { name: 'node-22' });
  const agent = await api(page, '/api/agents', {
    name: 'test-fixer',
    model: 'anthropic/claude-sonnet-4-5',
    runtime: 'claude',
    environment_id: env.id,
    description: 'Runs the test suite and fixes what fails',
  });
  const quick = [
    'echo "All green."',
    'printf "\\033[32m✔\\033[0m lint\\n"',
    'PADDOCK_USAGE=\'{"input_tokens":1832,"output_tokens":412}\'; echo "PADDOCK_USAGE=$PADDOCK_USAGE"',
  ].join('; ');
  for (const prompt of [`# Update the README badges\n${quick}`, `# Bump dependencies\n${quick}`]) {
    await api(page, '/api/conversations', { agent_id: agent.id, prompt });
  }
  const live = [
    '# Fix the failing parser tests',
    'printf "\\033[1m> npm test\\033[0m\\n\\n"',
    'for i in $(seq 1 18); do printf "  \\033[32m✔\\033[0m parser › case %s \\033[90m(%s ms)\\033[0m\\n" $i $((i*3)); done',
    'printf "  \\033[31m✖\\033[0m parser › nested quotes\\n    \\033[31mexpected \\033[1m\\"a\\\\\\"b\\"\\033[22m to equal \\033[1m\\"a\\"b\\"\\033[0m\\n"',
    'echo "Editing src/parser.ts…" >&2',
    'sleep 600',
  ].join('\n');
  const conversation = await api(page, '/api/conversations', { agent_id: agent.id, prompt: live });

  for (const size of SIZES) {
    const shot = await c.page({ width: size.width, height: size.height });
    await shot.goto(c.url('/sign-in'));
    await shot.getByLabel('Email').fill('ada@example.com');
    await shot.getByLabel('Password').fill('a long and lovely passphrase');
    await shot.getByRole('button', { name: 'Sign in' }).click();
    await shot.getByRole('heading', { name: 'Conversations' }).waitFor();
    await shot.locator('.conv-row').nth(2).waitFor();
    await shot.screenshot({ path: join(OUT, `dashboard-${size.name}.png`) });
    await shot.goto(c.url(`/conversations/${conversation.id}`));
    await shot.getByRole('tab', { name: 'Raw output' }).click();
    await shot
      .locator('#panel-raw .term-line', { hasText: 'Editing src/parser.ts' })
      .waitFor({ timeout: 60_000 });
    await shot.screenshot({ path: join(OUT, `conversation-${size.name}.png`) });
  }
  await api(page, `/api/conversations/${conversation.id}/terminate`, {});
});
