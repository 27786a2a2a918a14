// paddock usage: the CLI as a child process against the real app on a loopback port, over usage
// events the database's meter wrote as real sandbox and turn rows ended.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildTestApp, type TestApp } from '../../server/test/helpers/app.ts';
import { createVerifiedUser, type TestUser } from '../../server/test/helpers/factories.ts';
import { insertSandboxLife, readyThisMonth } from '../../server/test/helpers/usage-rows.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'paddock.mjs');

let t: TestApp;
let url: string;
let user: TestUser;
const temps: string[] = [];

before(async () => {
  t = await buildTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  user = await createVerifiedUser(t.deps.db);
  await insertSandboxLife(t.deps.db, user.id, {
    ready: readyThisMonth(2),
    hours: 2,
    busyMinutes: 30,
    tokens: { input: 1500, output: 250, costUsd: 0.5 },
  });
  await insertSandboxLife(t.deps.db, user.id, {
    ready: new Date('2026-01-10T08:00:00Z'),
    hours: 3,
    busyMinutes: 90,
    tokens: { input: 10_000, output: 2000, costUsd: 0.5 },
  });
});
after(async () => {
  await t.close();
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function paddock(args: string[]): Promise<Run> {
  const home = mkdtempSync(join(tmpdir(), 'paddock-cli-usage-'));
  temps.push(home);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: {
        PATH: process.env['PATH'],
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'config'),
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

describe('paddock usage', () => {
  it('shows this month by default: sandbox hours busy and parked, turns, tokens, cost, per model', async () => {
    const run = await paddock(['usage']);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^Usage from \d{4}-\d{2}-01 to \d{4}-\d{2}-01 \(UTC/);
    assert.match(run.stdout, /Sandboxes\s+1 \(0 failed before ready\)/);
    assert.match(run.stdout, /Busy\s+0\.50 h/);
    assert.match(run.stdout, /Parked\s+1\.50 h/);
    assert.match(run.stdout, /Turns\s+1\n/);
    assert.match(run.stdout, /Tokens\s+1,500 in, 250 out, 0 cache read/);
    assert.match(run.stdout, /Cost\s+\$0\.5000/);
    assert.match(run.stdout, /RUNTIME\s+MODEL\s+TURNS/);
  });

  it('--from and --to choose the range; -o json prints the API answer', async () => {
    const run = await paddock(['-o', 'json', 'usage', '--from', '2026-01-01', '--to', '2026-02-01']);
    assert.equal(run.code, 0, run.stderr);
    const body = JSON.parse(run.stdout);
    assert.equal(body.from, '2026-01-01T00:00:00.000Z');
    assert.deepEqual(body.sandboxes, {
      count: 1,
      failed_before_ready: 0,
      busy_seconds: 5400,
      parked_seconds: 5400,
    });
    assert.deepEqual(
      [body.turns.count, body.turns.input_tokens, body.turns.output_tokens],
      [1, 10_000, 2000],
    );
    const table = await paddock(['usage', '--from', '2026-01-01', '--to', '2026-02-01']);
    assert.match(table.stdout, /Usage from 2026-01-01 to 2026-02-01/);
    assert.match(table.stdout, /Busy\s+1\.50 h/);
  });

  it('a bad range exits 1 with the server’s reason', async () => {
    const run = await paddock(['usage', '--from', '2026-05-01', '--to', '2026-04-01']);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /from must be before to/);
    const garbled = await paddock(['usage', '--from', 'last-week']);
    assert.equal(garbled.code, 1);
    assert.match(garbled.stderr, /from is not an ISO 8601 date/);
  });
});
