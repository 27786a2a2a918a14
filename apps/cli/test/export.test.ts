// paddock export: the CLI as a child process against the real app (and its job runner) on a
// loopback port: it asks for the export, waits while it is built, and saves the download.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import type { JobRunner } from '../../server/src/jobs/worker.ts';
import { startJobs } from '../../server/test/helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../../server/test/helpers/app.ts';
import { createVerifiedUser, type TestUser } from '../../server/test/helpers/factories.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'paddock.mjs');

let t: TestApp;
let jobs: JobRunner;
let url: string;
let dir: string;

before(async () => {
  t = await buildTestApp();
  jobs = await startJobs(t);
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  dir = mkdtempSync(join(tmpdir(), 'paddock-cli-export-'));
});
after(async () => {
  await jobs.stop();
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

function paddock(user: TestUser, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: dir,
      env: {
        PATH: process.env['PATH'],
        HOME: dir,
        XDG_CONFIG_HOME: join(dir, 'config'),
        PADDOCK_URL: url,
        PADDOCK_API_KEY: user.apiKey,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += String(d);
    });
    child.stderr.on('data', (d) => {
      stderr += String(d);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

const exportsOf = async (user: TestUser) =>
  await t.deps.db.selectFrom('account_exports').select('id').where('tenant_id', '=', user.id).execute();

describe('paddock export', () => {
  it('asks for an export, waits for it, and saves the gzipped JSON to a file', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const file = join(dir, 'mine.json.gz');
    const run = await paddock(user, ['export', '--file', file]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^Saved export [0-9a-f-]{36} \(\d+(\.\d)? (bytes|KiB), gzipped JSON\) to .*mine\.json\.gz/,
    );
    const doc = JSON.parse(gunzipSync(readFileSync(file)).toString('utf8')) as {
      format: string;
      account: { id: string };
    };
    assert.equal(doc.format, 'paddock.account-export');
    assert.equal(doc.account.id, user.id);
    assert.ok(!existsSync(`${file}.part`));

    // An existing file is not overwritten, and nothing is asked of the server for it.
    const before = (await exportsOf(user)).length;
    const refused = await paddock(user, ['export', '--file', file]);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /mine\.json\.gz exists: choose another with --file, or overwrite it with --force/,
    );
    assert.equal((await exportsOf(user)).length, before);

    // --id downloads the one asked for earlier; -o json reports it for scripts.
    const id = (await exportsOf(user))[0]!.id;
    const again = await paddock(user, ['-o', 'json', 'export', '--id', id, '--file', file, '--force']);
    assert.equal(again.code, 0, again.stderr);
    const out = JSON.parse(again.stdout) as { id: string; file: string; size_bytes: number };
    assert.equal(out.id, id);
    assert.equal(out.size_bytes, readFileSync(file).length);
    assert.equal((await exportsOf(user)).length, before);
  });

  it('says why when the account asked for too many exports', async () => {
    const user = await createVerifiedUser(t.deps.db);
    for (let i = 0; i < 3; i++) {
      await t.deps.db
        .insertInto('account_exports')
        .values({ id: crypto.randomUUID(), tenant_id: user.id, status: 'failed' })
        .execute();
    }
    const run = await paddock(user, ['export', '--file', join(dir, 'limited.json.gz')]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /cannot ask for an export now: at most 3 exports per 24 hours; retry in \d+ s/);
    assert.ok(!existsSync(join(dir, 'limited.json.gz')));
  });
});
