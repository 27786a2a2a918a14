// Configuration, account and admin pages in real Chromium against the real server:
// environment, vault and agent created through the forms (a validation error shown next to
// its field on the way), export then re-import of the manifest with every resource unchanged,
// API keys, inference credentials, security and the audit log; an admin suspends a user who
// then cannot sign in. No secret the test set reaches the browser, and axe finds no serious
// or critical violation on any of these pages.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';
import { insertConversation, insertTurn } from '../../server/test/helpers/conversation-rows.ts';

let c: ConsoleHarness;
before(async () => {
  c = await startConsoleHarness();
});
after(async () => {
  await c?.close();
});

const PASSWORD = 'correct horse battery staple';
const ENV_SECRET = 'env-secret-value-4f1d9a';
const VAULT_SECRET = 'vault-secret-value-8c2e7b';
const REPLACED_SECRET = 'replaced-secret-value-1a9f';
const PROVIDER_KEY = 'sk-provider-key-value-77aa31';

async function register(email: string): Promise<void> {
  const res = await c.h.api(null, 'POST', '/api/auth/register', { email, password: PASSWORD });
  assert.equal(res.status, 201);
}

async function signIn(page: Page, email: string): Promise<void> {
  await page.goto(c.url('/sign-in'));
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
}

describe('configuration pages', () => {
  it('creates an environment, a vault and an agent through the forms, exports and re-imports them unchanged', async () => {
    const email = `cfg-${Date.now()}@example.com`;
    await register(email);
    const page = await c.page();
    await signIn(page, email);

    // Environment ---------------------------------------------------------------------
    await page.getByRole('link', { name: 'Environments' }).first().click();
    await page.getByRole('heading', { name: 'Environments', level: 1 }).waitFor();
    await c.axe(page, 'environments');
    await page.getByRole('link', { name: 'New environment' }).click();
    await page.getByRole('heading', { name: 'New environment' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('web');
    await page.getByRole('button', { name: 'Add variable' }).click();
    await page.getByLabel('Variable 1 name', { exact: true }).fill('NODE_ENV');
    await page.getByLabel('Variable 1 value', { exact: true }).fill('test');
    await page.getByLabel('npm', { exact: true }).fill('typescript@5.9.3');
    await page.getByRole('button', { name: 'Add repository' }).click();
    await page.getByLabel('Repository 1 URL').fill('https://github.com/acme/web.git');
    await page.getByLabel('Token secret').fill('GITHUB_TOKEN');
    const script = page.getByRole('textbox', { name: 'Setup script' });
    await script.click();
    await script.pressSequentially('if true; then\n');
    await page.keyboard.press('Tab');
    await script.pressSequentially('npm ci\nfi\n');
    // Shift+Tab takes the indentation back; Escape then Tab leaves the editor (no keyboard trap).
    await page.keyboard.press('Tab');
    assert.equal(await script.inputValue(), 'if true; then\n  npm ci\nfi\n  ');
    await page.keyboard.press('Shift+Tab');
    assert.equal(await script.inputValue(), 'if true; then\n  npm ci\nfi\n', 'Shift+Tab outdents');
    await page.keyboard.press('Escape');
    await page.keyboard.press('Tab');
    assert.equal(
      await page.locator('textarea.code-input:focus').count(),
      0,
      'Escape then Tab leaves the editor',
    );
    await page.getByLabel('Outbound network').selectOption('limited');
    await page.getByRole('button', { name: 'Add allowed host' }).click();
    await page.getByLabel('Allowed host 1', { exact: true }).fill('Not A Host');
    await c.axe(page, 'new environment');
    await page.getByRole('button', { name: 'Create environment' }).click();
    // The API's field error shows beside the allowlist, and nothing was created.
    await page.getByText(/allowed_hosts\.0: /).waitFor();
    await page.getByLabel('Allowed host 1', { exact: true }).fill('*.github.com');
    await page.getByRole('button', { name: 'Create environment' }).click();
    await page.getByRole('heading', { name: 'Environment web' }).waitFor();
    assert.equal(await script.inputValue(), 'if true; then\n  npm ci\nfi\n', 'Tab indents inside the editor');

    await page.getByLabel('Secret name').fill('GITHUB_TOKEN');
    await page.getByLabel('Secret value').fill(ENV_SECRET);
    await page.getByRole('button', { name: 'Add secret' }).click();
    const stored = page.getByRole('list', { name: 'Stored secrets' });
    await stored.locator('code', { hasText: 'GITHUB_TOKEN' }).waitFor();
    await stored.getByText('set', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Replace GITHUB_TOKEN' }).click();
    await page.getByLabel('New value for GITHUB_TOKEN').fill(REPLACED_SECRET);
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByRole('button', { name: 'Replace GITHUB_TOKEN' }).waitFor();
    await c.axe(page, 'edit environment');

    // Vault -----------------------------------------------------------------------------
    await page.getByRole('link', { name: 'Vaults' }).first().click();
    await page.getByRole('heading', { name: 'Vaults', level: 1 }).waitFor();
    await c.axe(page, 'vaults');
    await page.getByLabel('New vault name').fill('prod');
    await page.getByRole('button', { name: 'Create vault' }).click();
    await page.getByRole('heading', { name: 'Vault prod' }).waitFor();
    await page.getByLabel('Secret name').fill('API_TOKEN');
    await page.getByLabel('Secret value').fill(VAULT_SECRET);
    await page.getByRole('button', { name: 'Add secret' }).click();
    await page
      .getByRole('list', { name: 'Stored secrets' })
      .locator('code', { hasText: 'API_TOKEN' })
      .waitFor();
    await c.axe(page, 'vault');

    // Agent -----------------------------------------------------------------------------
    await page.getByRole('link', { name: 'Agents' }).first().click();
    await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
    await c.axe(page, 'agents');
    await page.getByRole('link', { name: 'New agent' }).click();
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('reviewer');
    await page.getByLabel('Runtime').selectOption('claude');
    await page.getByLabel('Model').fill('no-slash-model');
    await page.getByLabel('Environment', { exact: true }).selectOption({ label: 'web' });
    await page.getByLabel('prod').check();
    await page.getByRole('textbox', { name: 'System prompt' }).fill('Review the change carefully.');
    await page.getByRole('button', { name: 'Add inline skill' }).click();
    await page.getByLabel('Skill 1 name').fill('lint');
    await page.getByRole('textbox', { name: 'Skill 1 SKILL.md' }).fill('# Lint\nRun the linter.');
    await page.getByRole('button', { name: 'Add MCP server' }).click();
    await page.getByLabel('Server 1 name').fill('gh');
    await page.getByLabel('Server 1 command').fill('npx');
    await page.getByRole('button', { name: 'Add server 1 argument' }).click();
    await page.getByLabel('Server 1 argument 1', { exact: true }).fill('-y');
    await page.getByRole('button', { name: 'Add server 1 variable' }).click();
    await page.getByLabel('Server 1 variable 1 name', { exact: true }).fill('TOKEN');
    await page.getByLabel('Server 1 variable 1 value', { exact: true }).fill('${GITHUB_TOKEN}');
    // The ${VAR} hint says where the reference comes from.
    await page.getByRole('list', { name: 'Variable references' }).getByText('secret of web').waitFor();
    await c.axe(page, 'new agent');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page
      .getByText(/must be <provider>\/<model_id>|provider/i)
      .first()
      .waitFor();
    await page.getByLabel('Model').fill('anthropic/claude-sonnet-4-5');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'Agent reviewer' }).waitFor();
    await c.axe(page, 'edit agent');

    // Export, then re-import: a preview first, then the apply; everything unchanged -----------
    await page.goto(c.url('/manifest'));
    await page.getByRole('heading', { name: 'Export / import' }).waitFor();
    await page.getByRole('button', { name: 'Export manifest' }).click();
    const exported = page.getByTitle('Exported manifest');
    await exported.getByText('${env:GITHUB_TOKEN}').waitFor();
    const yaml = (await exported.textContent()) ?? '';
    assert.match(yaml, /kind: Agent/);
    assert.match(yaml, /environment: web/);
    await c.axe(page, 'export');
    await page.getByRole('button', { name: 'Use as import' }).click();
    await page.getByLabel('Value for GITHUB_TOKEN').waitFor();
    await page.getByRole('button', { name: 'Preview changes' }).click();
    await page.getByText('Preview (nothing applied yet)').waitFor();
    await page.getByText('0 to create · 0 to update · 3 unchanged · 0 with errors').waitFor();
    await c.axe(page, 'import preview');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('heading', { name: 'Applied' }).waitFor();
    await page.getByText('0 to create · 0 to update · 3 unchanged · 0 with errors').waitFor();

    // Unreadable YAML: where the problem is, with no dangling colon (the source is left out).
    await page.goto(c.url('/manifest'));
    await page
      .getByLabel('Manifest (YAML)')
      .fill('apiVersion: paddock/v1\nkind: Environment\nmetadata: {name: x\n');
    await page.getByRole('button', { name: 'Preview changes' }).click();
    const problem = (await page.getByRole('alert').locator('li').first().textContent()) ?? '';
    assert.match(problem, /^document 1: invalid YAML: Flow map .* at line 4, column 1$/);

    // The secrets kept their values (the import left them out), checked on the server side.
    const user = (
      await c.h.deps.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()
    ).id;
    const envRow = await c.h.deps.db
      .selectFrom('environments')
      .select('id')
      .where('tenant_id', '=', user)
      .executeTakeFirstOrThrow();
    const envSecrets = await c.h.deps.secrets.decryptOwner(user, { kind: 'environment', id: envRow.id });
    assert.deepEqual(envSecrets, { GITHUB_TOKEN: REPLACED_SECRET });

    for (const secret of [ENV_SECRET, REPLACED_SECRET, VAULT_SECRET, PASSWORD]) c.assertNoSecret(secret);
    assert.deepEqual(c.pageProblems(), []);
  });

  it("offers the runtime's models in the agent form and refuses one the runtime cannot run before saving", async () => {
    const email = `model-${Date.now()}@example.com`;
    await register(email);
    const page = await c.page();
    await signIn(page, email);
    await page.goto(c.url('/agents/new'));
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    const model = page.getByLabel('Model');
    const suggestions = async () => {
      const options = page.locator('#agent-model-suggestions option');
      const values: string[] = [];
      for (let k = 0; k < (await options.count()); k++)
        values.push((await options.nth(k).getAttribute('value')) ?? '');
      assert.ok(values.length > 0, 'the picker has suggestions');
      return values;
    };
    // The picker and the placeholder follow the runtime; free text stays allowed.
    assert.equal(await model.getAttribute('list'), 'agent-model-suggestions');
    assert.equal(await model.getAttribute('placeholder'), 'anthropic/claude-sonnet-4-5');
    assert.ok((await suggestions()).every((m) => m.startsWith('anthropic/')));
    await page.getByLabel('Runtime').selectOption('codex');
    assert.equal(await model.getAttribute('placeholder'), 'openai/gpt-5.5');
    assert.ok((await suggestions()).every((m) => m.startsWith('openai/')));
    await page.getByText('openai/<model_id>: Codex runs OpenAI models').waitFor();
    await page.getByLabel('Runtime').selectOption('gemini');
    assert.equal(await model.getAttribute('placeholder'), 'google/gemini-2.5-pro');
    await page.getByLabel('Runtime').selectOption('opencode');
    const all = await suggestions();
    for (const p of ['anthropic/', 'openai/', 'google/'])
      assert.ok(
        all.some((m) => m.startsWith(p)),
        p,
      );

    // A codex agent with an Anthropic model: said under the field as it is typed; not saved.
    await page.getByLabel('Name', { exact: true }).fill('coder');
    await page.getByLabel('Runtime').selectOption('codex');
    await model.fill('anthropic/claude-sonnet-4-5');
    const message =
      'codex runs OpenAI models (openai/<model_id>); anthropic/claude-sonnet-4-5 is an Anthropic model: choose an OpenAI model, or the claude or opencode runtime';
    await page.getByText(message).waitFor();
    assert.equal(await model.getAttribute('aria-invalid'), 'true');
    await c.axe(page, 'new agent, model mismatch');
    await page.getByRole('button', { name: 'Create agent' }).click();
    assert.equal(await model.and(page.locator(':focus')).count(), 1, 'the model field has the focus');
    const user = (
      await c.h.deps.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()
    ).id;
    const count = async () =>
      (await c.h.deps.db.selectFrom('agents').select('id').where('tenant_id', '=', user).execute()).length;
    assert.equal(await count(), 0, 'nothing was created');

    // A model of another provider name (a gateway's) is free text the runtime may run.
    await model.fill('litellm/gpt-5');
    assert.equal(await page.getByText(message).count(), 0);
    await model.fill('openai/gpt-5');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'Agent coder' }).waitFor();
    assert.equal(await count(), 1);

    // An agent saved before the rule lists and opens; the form says what to change.
    await c.h.deps.db
      .insertInto('agents')
      .values({
        id: '01900000-0000-7000-8000-000000000037',
        tenant_id: user,
        name: 'legacy',
        model: 'anthropic/claude-sonnet-4-5',
        runtime: 'codex',
        skills: '[]',
        mcp_servers: '{}',
        metadata: '{}',
      })
      .execute();
    await page.goto(c.url('/agents'));
    await page.getByRole('link', { name: 'legacy' }).click();
    await page.getByRole('heading', { name: 'Agent legacy' }).waitFor();
    await page.getByText(message).waitFor();

    // opencode runs three providers' models, and says so for any other.
    await page.getByLabel('Runtime').selectOption('opencode');
    await model.fill('ollama/llama3');
    await page
      .getByText(
        'opencode runs models of anthropic, openai or google (anthropic/…, openai/…, google/… or gemini/…), not of "ollama"',
      )
      .waitFor();
    assert.deepEqual(c.pageProblems(), []);
  });

  it('manages API keys, inference credentials and sessions, and shows the audit log', async () => {
    const email = `acct-${Date.now()}@example.com`;
    await register(email);
    const other = await c.page();
    await signIn(other, email);
    const page = await c.page({ width: 390, height: 844 });
    await signIn(page, email);
    await page.goto(c.url('/account'));
    await page.getByRole('heading', { name: 'API keys and credentials' }).waitFor();
    await page.getByLabel('Key name').fill('laptop');
    await page.getByRole('button', { name: 'Create key' }).click();
    const plaintext = (await page.locator('.plaintext-key').textContent()) ?? '';
    assert.match(plaintext, /^pdk_/);
    await page.getByRole('button', { name: 'Copy key' }).waitFor();
    await page.getByRole('button', { name: 'Revoke laptop' }).waitFor();
    await c.axe(page, 'account');
    const listed = await c.h.api(null, 'GET', '/api/auth/me', undefined, {
      authorization: `Bearer ${plaintext}`,
    });
    assert.equal(listed.status, 200, 'the key shown once works');
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Revoke laptop' }).click();
    await page.getByText('No API keys.').waitFor();

    await page.getByRole('button', { name: 'Set anthropic key' }).click();
    await page.getByLabel('anthropic API key').fill(PROVIDER_KEY);
    // A gateway no sandbox can reach is refused under its field, saying what the operator declares.
    await page.getByLabel('Base URL (optional)').fill('http://127.0.0.1:4555');
    await page.getByRole('button', { name: 'Save key' }).click();
    await page
      .getByText(
        'no sandbox can reach 127.0.0.1: it is this machine, which sandboxes never reach directly. The operator declares a service route for the gateway (SANDBOXD_SERVICE_ROUTES=gateway.internal=127.0.0.1:4555) and the base URL names it: http://gateway.internal:4555',
      )
      .waitFor();
    await page.getByLabel('Base URL (optional)').fill('');
    await page.getByRole('button', { name: 'Save key' }).click();
    await page.getByRole('button', { name: 'Replace anthropic key' }).waitFor();

    await page.getByRole('link', { name: 'Security' }).click();
    await page.getByRole('heading', { name: 'Security' }).waitFor();
    await c.axe(page, 'security');
    await page.getByRole('button', { name: 'Sign out other sessions' }).click();
    await page.getByText('1 other session signed out.').waitFor();
    await other.goto(c.url('/conversations'));
    await other.getByRole('heading', { name: 'Sign in to Paddock' }).waitFor();

    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('heading', { name: 'Audit log' }).waitFor();
    await page.getByText('auth.sessions.ended').waitFor();
    await page.getByText('api_key.revoked').waitFor();
    await c.axe(page, 'audit log');

    c.assertNoSecret(PROVIDER_KEY);
    assert.deepEqual(c.pageProblems(), []);
  });
});

describe('admin pages', () => {
  it('are hidden from a non-admin, and let an admin find, inspect and suspend a user who then cannot sign in', async () => {
    const stamp = Date.now();
    const adminEmail = `admin-${stamp}@example.com`;
    const userEmail = `target-${stamp}@example.com`;
    await register(adminEmail);
    await register(userEmail);
    await c.h.deps.db.updateTable('users').set({ is_admin: true }).where('email', '=', adminEmail).execute();
    const target = await c.h.deps.db
      .selectFrom('users')
      .select('id')
      .where('email', '=', userEmail)
      .executeTakeFirstOrThrow();
    const conversation = await insertConversation(c.h.deps.db, target.id, { status: 'idle' });
    await insertTurn(c.h.deps.db, conversation, 1);

    const plain = await c.page();
    await signIn(plain, userEmail);
    assert.equal(await plain.getByRole('link', { name: 'Admin' }).count(), 0, 'no Admin link for a user');
    await plain.goto(c.url('/admin/users'));
    await plain.getByRole('heading', { name: /not found/i }).waitFor();
    // /admin answers a non-admin like every admin page, and someone signed out is asked to sign in.
    await plain.goto(c.url('/admin'));
    await plain.getByRole('heading', { name: /not found/i }).waitFor();
    assert.equal(new URL(plain.url()).pathname, '/admin');
    const anonymous = await c.page();
    await anonymous.goto(c.url('/admin'));
    await anonymous.waitForURL(/\/sign-in\?next=%2Fadmin$/);
    await anonymous.getByRole('heading', { name: 'Sign in to Paddock' }).waitFor();

    const page = await c.page();
    await signIn(page, adminEmail);
    // /admin lands on the admin's first page, its users.
    await page.goto(c.url('/admin'));
    await page.waitForURL(c.url('/admin/users'));
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await page.goto(c.url('/conversations'));
    await page.getByRole('link', { name: 'Admin' }).click();
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await page.getByLabel('Search by email').fill(`target-${stamp}`);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/\?q=target-/);
    const row = page.getByRole('row', { name: new RegExp(userEmail) });
    await row.waitFor();
    // The unfiltered list stays on screen (the table aria-busy) until the search's answer replaces it.
    await page.locator('table[aria-busy="false"]').waitFor();
    const rows = page.getByRole('row');
    for (let i = 0; i < 50 && (await rows.count()) !== 2; i++) await page.waitForTimeout(100);
    assert.equal(await rows.count(), 2, 'the header and the one match');
    await c.axe(page, 'admin users');

    await row.getByRole('link', { name: userEmail }).click();
    await page.getByRole('heading', { name: userEmail }).waitFor();
    await page
      .getByText('0 environments · 0 vaults · 0 agents · 1 conversation · 0 active API keys')
      .waitFor();
    await c.axe(page, 'admin user');
    await page.getByRole('link', { name: `conversation ${conversation.id}` }).click();
    await page.getByRole('heading', { name: /^Conversation / }).waitFor();
    await page.getByText(conversation.id, { exact: true }).waitFor();
    await c.axe(page, 'admin conversation');
    // Metadata only: the turn's prompt and the title never reach the admin's browser.
    assert.equal(await page.getByText('echo hi').count(), 0);
    await page.getByRole('link', { name: `← ${userEmail}` }).click();
    await page.getByRole('link', { name: '← Users' }).click();

    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: `Suspend ${userEmail}` }).click();
    await page
      .getByRole('row', { name: new RegExp(userEmail) })
      .getByText('suspended')
      .waitFor();

    // The suspended user's open session ends, and signing in again is refused.
    await plain.reload();
    await plain.getByRole('heading', { name: 'Sign in to Paddock' }).waitFor();
    await plain.getByLabel('Email').fill(userEmail);
    await plain.getByLabel('Password').fill(PASSWORD);
    await plain.getByRole('button', { name: 'Sign in' }).click();
    await plain.getByRole('alert').waitFor();
    assert.match(plain.url(), /\/sign-in/);

    const reads = await c.h.deps.db
      .selectFrom('audit_events')
      .innerJoin('users', 'users.id', 'audit_events.tenant_id')
      .select('audit_events.type')
      .where('users.email', '=', adminEmail)
      .execute();
    const types = reads.map((r) => r.type);
    assert.ok(types.includes('admin.users.listed'));
    assert.ok(types.includes('admin.user.read'));
    assert.ok(types.includes('admin.conversations.listed'));
    assert.ok(types.includes('admin.conversation.read'));
    // No admin answer the browser received carries the conversation's title or prompt.
    const adminBodies = c.responses().filter((r) => r.path.startsWith('/api/admin/'));
    assert.ok(adminBodies.some((r) => r.path.startsWith('/api/admin/conversations/')));
    for (const r of adminBodies) {
      assert.ok(!r.body.includes('test conversation') && !r.body.includes('echo hi'), r.path);
    }
    assert.deepEqual(c.pageProblems(), []);
  });

  it('let an admin set a temporary password for a locked-out user, who signs in with it (issue 37, finding 5)', async () => {
    const stamp = Date.now();
    const adminEmail = `pwadmin-${stamp}@example.com`;
    const userEmail = `locked-${stamp}@example.com`;
    await register(adminEmail);
    await register(userEmail);
    await c.h.deps.db.updateTable('users').set({ is_admin: true }).where('email', '=', adminEmail).execute();
    const target = await c.h.deps.db
      .selectFrom('users')
      .select('id')
      .where('email', '=', userEmail)
      .executeTakeFirstOrThrow();

    const plain = await c.page();
    await signIn(plain, userEmail);

    const page = await c.page();
    await signIn(page, adminEmail);
    await page.goto(c.url(`/admin/users/${target.id}`));
    await page.getByRole('heading', { name: userEmail }).waitFor();
    // No mail on this instance (EMAIL_DELIVERY=none outside development): the link cannot go out,
    // and the answer says what works instead.
    await page.getByRole('button', { name: 'Send a reset link' }).click();
    await page
      .getByRole('alert')
      .getByText(/set a temporary password instead/)
      .waitFor();

    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Set a temporary password' }).click();
    const shown = page.locator('code.plaintext-key');
    await shown.waitFor();
    const temporary = (await shown.textContent())?.trim() ?? '';
    assert.ok(temporary.length >= 20, temporary);
    await c.axe(page, 'admin user, temporary password');

    // Their open session ended (the console shows the signed-out home page); the temporary
    // password signs them in.
    await plain.reload();
    await plain.getByRole('link', { name: 'Create an account' }).waitFor();
    await plain.goto(c.url('/sign-in'));
    await plain.getByLabel('Email').fill(userEmail);
    await plain.getByLabel('Password').fill(temporary);
    await plain.getByRole('button', { name: 'Sign in' }).click();
    await plain.getByRole('heading', { name: 'Conversations' }).waitFor();

    const set = await c.h.deps.db
      .selectFrom('audit_events')
      .select(['type', 'metadata'])
      .where('tenant_id', '=', target.id)
      .where('type', '=', 'admin.user.password_set')
      .execute();
    assert.equal(set.length, 1);
    assert.ok(!JSON.stringify(set).includes(temporary));
    assert.deepEqual(c.pageProblems(), []);
  });
});
