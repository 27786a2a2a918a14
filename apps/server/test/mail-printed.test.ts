// Issue 37, finding 5: with no mail configured in development (`npm start`: EMAIL_DELIVERY=none),
// every mail Paddock would send is printed to the server's output (recipient, subject, text with
// its links), so "Forgot password" works on a laptop; in production and under tests nothing is
// made, so no link reaches a log shipped elsewhere. The real `paddock-server serve` process.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseConfig } from '../src/config/config.ts';
import { freePort } from '../src/db/embedded.ts';
import { printsMail } from '../src/mail/mailer.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';

const MAIN = resolve(import.meta.dirname, '..', 'src', 'main.ts');

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out: ${what}`);
}

describe('mail printed in development without a mail setting (issue 37, finding 5)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let child: ChildProcess | undefined;
  before(async () => {
    db = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'mail-printed-'));
  });
  after(async () => {
    child?.kill('SIGKILL');
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints the reset mail with its link to the terminal, and the link sets a new password', async () => {
    const port = await freePort();
    // As `npm start` runs it: NODE_ENV unset (development), EMAIL_DELIVERY=none, readable log.
    child = spawn(process.execPath, [MAIN, 'serve'], {
      env: {
        PATH: process.env['PATH'] ?? '',
        LOG_FORMAT: 'pretty',
        PORT: String(port),
        DATABASE_URL: db.url,
        DATABASE_SSL: 'false',
        PADDOCK_DATA_DIR: dataDir,
        MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
        EMAIL_DELIVERY: 'none',
      },
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    await until(() => out.includes('Paddock is listening'), 60_000, `serve listening:\n${out}`);
    const base = `http://127.0.0.1:${port}`;
    const post = (path: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    const email = `forgot-${Date.now()}@example.com`;
    assert.equal((await post('/api/auth/register', { email, password: 'first passphrase 37!' })).status, 201);
    const asked = await post('/api/auth/password-reset', { email });
    assert.equal(asked.status, 202);
    // The page shows this answer: it says where the mail went.
    assert.match(((await asked.json()) as { message: string }).message, /printed in the terminal/);
    // One printed mail per block; the reset one carries the link.
    const resetMail = () =>
      out.split('mail not sent').find((block) => block.includes('/reset-password?token='));
    await until(() => resetMail() !== undefined, 30_000, `the reset mail printed:\n${out}`);
    const [, to, subject, url, token] =
      /To: (\S+)\n {2}Subject: ([^\n]+)\n\n[\s\S]*?(http\S+\/reset-password\?token=([\w-]+))/.exec(
        resetMail() ?? '',
      ) ?? [];
    assert.equal(to, email);
    assert.match(subject ?? '', /reset/i);
    // The link opens the origin the server printed (where the person's session cookie lives).
    assert.ok(url?.startsWith(`${base}/reset-password?token=`), url);
    // The welcome mail of the self-verified account is printed too: every mail, not only resets.
    assert.match(
      out,
      new RegExp(`To: ${email.replace('.', '\\.')}\\n {2}Subject: Your Paddock account is ready`),
    );

    const reset = await post('/api/auth/password-reset/confirm', {
      token,
      password: 'second passphrase 37!',
    });
    assert.equal(reset.status, 200, await reset.text());
    const signIn = await post('/api/auth/token', { email, password: 'second passphrase 37!' });
    assert.equal(signIn.status, 201);
  });

  it('prints nothing outside development: production and tests make no mail under EMAIL_DELIVERY=none', () => {
    assert.equal(printsMail(parseConfig({ EMAIL_DELIVERY: 'none' }).config), true);
    assert.equal(printsMail(parseConfig({ NODE_ENV: 'test', EMAIL_DELIVERY: 'none' }).config), false);
    const production = {
      NODE_ENV: 'production',
      PUBLIC_URL: 'https://paddock.example.com',
      MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
      DATABASE_URL: 'postgres://u:p@db.example.com:5432/paddock',
      EMAIL_DELIVERY: 'none',
    };
    assert.equal(printsMail(parseConfig(production).config), false);
    assert.equal(printsMail(parseConfig({ SMTP_HOST: 'smtp.example.com' }).config), false);
  });
});
