// paddock account delete: the CLI as a child process against the real app on a loopback port.
// The address is typed again, the password travels on standard input only, and the key the
// CLI stored dies with the account and leaves the config file.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { hashPassword } from '../../server/src/accounts/password.ts';
import { buildTestApp, type TestApp } from '../../server/test/helpers/app.ts';
import { createVerifiedUser } from '../../server/test/helpers/factories.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'paddock.mjs');
const PASSWORD = 'correct horse battery staple 9';

let t: TestApp;
let url: string;
const temps: string[] = [];

before(async () => {
  t = await buildTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
after(async () => {
  await t.close();
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function paddock(home: string, args: string[], stdin = '', extraEnv: Record<string, string> = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { PATH: process.env['PATH'], HOME: home, XDG_CONFIG_HOME: join(home, 'config'), ...extraEnv },
      stdio: ['pipe', 'pipe', 'pipe'],
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
    child.stdin.end(stdin);
  });
}

async function exists(id: string): Promise<boolean> {
  return (
    (await t.deps.db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst()) !== undefined
  );
}

describe('paddock account delete', () => {
  it('deletes the logged-in account after the address and password, and removes the stored key', async () => {
    const user = await createVerifiedUser(t.deps.db);
    await t.deps.db
      .updateTable('users')
      .set({ password_hash: await hashPassword(PASSWORD) })
      .where('id', '=', user.id)
      .execute();
    const home = mkdtempSync(join(tmpdir(), 'paddock-cli-account-'));
    temps.push(home);
    const login = await paddock(
      home,
      ['login', '--url', url, '--email', user.email, '--password-stdin'],
      `${PASSWORD}\n`,
    );
    assert.equal(login.code, 0, login.stderr);

    const wrongAddress = await paddock(
      home,
      ['account', 'delete', '--confirm', 'someone@example.com'],
      `${PASSWORD}\n`,
    );
    assert.equal(wrongAddress.code, 1);
    assert.match(wrongAddress.stderr, /nothing was deleted/);
    const wrongPassword = await paddock(
      home,
      ['account', 'delete', '--confirm', user.email],
      'not the password\n',
    );
    assert.equal(wrongPassword.code, 1);
    assert.match(wrongPassword.stderr, /current_password/);
    assert.equal(await exists(user.id), true);

    const deleted = await paddock(
      home,
      ['account', 'delete', '--confirm', user.email.toUpperCase()],
      `${PASSWORD}\n`,
    );
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(
      deleted.stdout,
      new RegExp(`Deleted the account ${user.email.replace('.', '\\.')}; removed its key`),
    );
    assert.equal(await exists(user.id), false);
    const stored = JSON.parse(readFileSync(join(home, 'config', 'paddock', 'config.json'), 'utf8'));
    assert.equal(stored.api_key, undefined);
    assert.equal(stored.url, url, 'the server URL stays');
    assert.ok(!`${deleted.stdout}${deleted.stderr}`.includes(PASSWORD), 'the password is never printed');
  });

  it('leaves a stored key of another account alone when PADDOCK_API_KEY chose the account', async () => {
    const stays = await createVerifiedUser(t.deps.db);
    await t.deps.db
      .updateTable('users')
      .set({ password_hash: await hashPassword(PASSWORD) })
      .where('id', '=', stays.id)
      .execute();
    const leaving = await createVerifiedUser(t.deps.db);
    const home = mkdtempSync(join(tmpdir(), 'paddock-cli-account-'));
    temps.push(home);
    assert.equal(
      (
        await paddock(
          home,
          ['login', '--url', url, '--email', stays.email, '--password-stdin'],
          `${PASSWORD}\n`,
        )
      ).code,
      0,
    );
    const res = await paddock(home, ['-o', 'json', 'account', 'delete', '--confirm', leaving.email], '', {
      PADDOCK_API_KEY: leaving.apiKey,
    });
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(JSON.parse(res.stdout), { deleted: leaving.email, key_removed_from: null });
    assert.equal(await exists(leaving.id), false);
    const stored = JSON.parse(readFileSync(join(home, 'config', 'paddock', 'config.json'), 'utf8'));
    assert.ok(stored.api_key, "the other account's stored key stays");
    assert.equal(await exists(stays.id), true);
  });
});
