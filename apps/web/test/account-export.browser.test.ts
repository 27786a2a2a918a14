// The data export on /account in real Chromium against the real server and job runner: asked
// for with a click, offered for download once built, as gzipped JSON of the account that
// holds no secret value; axe finds no serious or critical violation on the way.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { type JobRunner, startJobRunner } from '../../server/src/jobs/worker.ts';
import { type ConsoleHarness, startConsoleHarness } from '../../server/test/helpers/browser.ts';

let c: ConsoleHarness;
let jobs: JobRunner;
before(async () => {
  c = await startConsoleHarness();
  jobs = await startJobRunner({
    pool: c.h.deps.database.pool,
    logger: c.h.deps.logger,
    tasks: c.h.deps.jobTasks,
    pollIntervalMs: 100,
  });
});
after(async () => {
  await jobs?.stop();
  await c?.close();
});

const PASSWORD = 'correct horse battery staple';
const VAULT_SECRET = 'vault-secret-value-export-5e2a91';

describe('account data export', () => {
  it('asks for the export with a click and downloads it when ready, without a secret value', async () => {
    const email = `export-${Date.now()}@example.com`;
    const registered = await c.h.api(null, 'POST', '/api/auth/register', { email, password: PASSWORD });
    assert.equal(registered.status, 201);
    const page = await c.page();
    await page.goto(c.url('/sign-in'));
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Conversations' }).waitFor();
    // A vault with a secret, through the console's own API call (the session's cookie).
    const created = await page.evaluate(async (secret) => {
      const res = await fetch('/api/apply', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          resources: [{ kind: 'Vault', name: 'prod', spec: { secrets: { TOKEN: secret } } }],
        }),
      });
      return res.status;
    }, VAULT_SECRET);
    assert.equal(created, 200);

    await page.goto(c.url('/account'));
    await page.getByRole('button', { name: 'Export my data' }).click();
    const link = page.getByRole('link', { name: 'Download it' });
    await link.waitFor({ timeout: 30_000 });
    await c.axe(page, 'account with a ready export');
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    assert.match(download.suggestedFilename(), /^paddock-export-\d{4}-\d\d-\d\d\.json\.gz$/);
    const path = await download.path();
    const text = gunzipSync(readFileSync(path)).toString('utf8');
    const doc = JSON.parse(text) as { account: { email: string }; manifests: Array<{ kind: string }> };
    assert.equal(doc.account.email, email);
    assert.deepEqual(
      doc.manifests.map((m) => m.kind),
      ['Vault'],
    );
    assert.ok(!text.includes(VAULT_SECRET), 'no secret value in the download');
    c.assertNoSecret(VAULT_SECRET);
    assert.deepEqual(c.pageProblems(), []);
  });
});
