// The real `paddock-server` process: configuration refusals, a down database, and a
// graceful SIGTERM.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/db/embedded.ts';
import { SERVER_NODE_FLAGS } from '../src/node-flags.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const BIN = fileURLToPath(new URL('../bin/paddock-server.mjs', import.meta.url));

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to its exit (killed after timeoutMs), with exactly the environment given. */
function runProcess(
  file: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} did not exit within ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function runServer(
  env: Record<string, string>,
  args: string[] = ['serve'],
  timeoutMs = 30_000,
): Promise<RunResult> {
  return runProcess(
    process.execPath,
    [MAIN, ...args],
    { PATH: process.env['PATH'] ?? '', ...env },
    timeoutMs,
  );
}

const PROD = {
  NODE_ENV: 'production',
  PUBLIC_URL: 'https://paddock.example.com',
  MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
  DATABASE_URL: 'postgres://paddock:x@127.0.0.1:1/paddock',
  EMAIL_DELIVERY: 'none',
};

describe('paddock-server boot', () => {
  it('runs from its bin with the server Node flags (the shebang repeats node-flags.ts)', async () => {
    const shebang = readFileSync(BIN, 'utf8').split('\n')[0];
    assert.equal(shebang, `#!/usr/bin/env -S node ${SERVER_NODE_FLAGS.join(' ')}`);
    // The bin finds `node` on PATH: this Node first.
    const result = await runProcess(BIN, ['help'], {
      PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}`,
    });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^usage: paddock-server/);
  });

  for (const variable of ['PUBLIC_URL', 'MASTER_SECRETS_KEY', 'EMAIL_DELIVERY', 'DATABASE_URL']) {
    it(`exits non-zero naming ${variable} when production lacks it`, async () => {
      const env: Record<string, string> = { ...PROD };
      delete env[variable];
      const res = await runServer(env);
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, new RegExp(variable));
    });
  }

  it('exits non-zero naming SANDBOX_MAX_LIFETIME_HOURS=abc', async () => {
    const res = await runServer({ ...PROD, SANDBOX_MAX_LIFETIME_HOURS: 'abc' });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /SANDBOX_MAX_LIFETIME_HOURS/);
  });

  it('exits non-zero naming EMAIL_FROM and BILLING_WEBHOOK_SECRET when their conditions hold', async () => {
    const a = await runServer({ ...PROD, EMAIL_DELIVERY: '', SMTP_HOST: 'smtp.example.com' });
    assert.notEqual(a.code, 0);
    assert.match(a.stderr, /EMAIL_FROM/);
    const b = await runServer({ ...PROD, BILLING_ENABLED: 'true' });
    assert.notEqual(b.code, 0);
    assert.match(b.stderr, /BILLING_WEBHOOK_SECRET/);
  });

  it('fails with a clear message when the database is down', async () => {
    const res = await runServer({ ...PROD, DATABASE_SSL: 'false' });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /cannot connect to the database/);
    assert.doesNotMatch(res.stderr, / {4}at /, 'no stack trace');
  });
});

describe('paddock-server serve', () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db.drop();
  });

  /** Starts `serve` on `port` and waits until it listens; its output so far, and its exit code. */
  async function serve(port: number, extra: Record<string, string> = {}) {
    const child = spawn(process.execPath, [MAIN, 'serve'], {
      env: {
        PATH: process.env['PATH'] ?? '',
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        PORT: String(port),
        DATABASE_URL: db.url,
        DATABASE_SSL: 'false',
        MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
        ...extra,
      },
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    // Boot time is not under test here (a loaded machine can take seconds); exiting early is.
    for (let i = 0; i < 600 && !out.includes('Paddock is listening') && child.exitCode === null; i++)
      await new Promise((r) => setTimeout(r, 100));
    return { child, exited, out: () => out };
  }

  it('serves, exposes /metrics only on METRICS_PORT, and drains on SIGTERM with exit 0', async () => {
    const port = await freePort();
    const metricsPort = await freePort();
    const { child, exited, out } = await serve(port, { METRICS_PORT: String(metricsPort) });
    try {
      assert.match(out(), /Paddock is listening/);
      assert.equal((await fetch(`http://127.0.0.1:${port}/health/ready`)).status, 200);
      assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 404);
      const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /paddock_http_request_duration_seconds/);
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
      assert.match(out(), /shutdown complete/);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('drains on SIGHUP (its terminal closed) with exit 0', async () => {
    const { child, exited, out } = await serve(await freePort());
    try {
      assert.match(out(), /Paddock is listening/);
      child.kill('SIGHUP');
      assert.equal(await exited, 0);
      assert.match(out(), /"signal":"SIGHUP".*shutting down/);
      assert.match(out(), /shutdown complete/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
