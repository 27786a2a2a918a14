// `paddock run -f` across a server that dies mid-turn: the server runs as its own process
// (apps/server/test/fixtures/serve-scripted.ts, the real `serve` boot with the scripted
// runtime) on a fixed port; it is killed with SIGKILL while the CLI follows a turn printing a
// numbered line every 10 ms, then started again (its boot sweep re-joins the turn). The CLI
// reconnects with Last-Event-ID and its stdout is exactly what the program printed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from '../../sandboxd/test/harness.ts';
import { freePort } from '../../server/src/db/embedded.ts';
import { createTestDatabase, type TestDatabase } from '../../server/test/helpers/database.ts';
import { createVerifiedUser, type TestUser } from '../../server/test/helpers/factories.ts';
import { scriptedServerProcess } from '../../server/test/helpers/scripted-server.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'paddock.mjs');
const LINES = 400;

let sandboxd: TestSandboxd;
let database: TestDatabase;
let env: NodeJS.ProcessEnv;
let url = '';
let user: TestUser;
let home = '';

const serverProcess = scriptedServerProcess(() => env, 60_000);

async function startServer(): Promise<void> {
  url = await serverProcess.start();
}

async function stopServer(signal: NodeJS.Signals): Promise<void> {
  await serverProcess.stop(signal);
}

before(async () => {
  sandboxd = await startTestSandboxd();
  database = await createTestDatabase();
  user = await createVerifiedUser(database.handle.db);
  home = mkdtempSync(join(tmpdir(), 'paddock-cli-restart-'));
  env = {
    PATH: process.env['PATH'],
    TMPDIR: process.env['TMPDIR'],
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    DATABASE_URL: database.url,
    DATABASE_SSL: 'false',
    MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
    EMAIL_DELIVERY: 'none',
    SANDBOX_BASE_URL: sandboxd.url,
    SANDBOX_TOKEN: sandboxd.token,
    RATE_LIMIT_MAX: '100000',
  };
  await startServer();
});

after(async () => {
  await stopServer('SIGTERM');
  await sandboxd.stop();
  await database.drop();
  rmSync(home, { recursive: true, force: true });
});

it('run -f survives a kill -9 of the server mid-turn: reconnects, resumes, prints every line once', async () => {
  const agent = await fetch(`${url}/api/agents`, {
    method: 'POST',
    headers: { ...user.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'numbered', model: 'anthropic/claude-sonnet-4-5', runtime: 'claude' }),
  });
  assert.equal(agent.status, 201);

  const script = `i=1; while [ $i -le ${LINES} ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done`;
  const cli = spawn(process.execPath, [BIN, 'run', 'numbered', script, '-f'], {
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
  let killed = false;
  const done = new Promise<number>((resolve) => cli.on('close', (code) => resolve(code ?? 1)));
  const sawLine40 = new Promise<void>((resolve) => {
    cli.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!killed && stdout.includes('line 40\n')) resolve();
    });
  });
  cli.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });

  await sawLine40;
  killed = true;
  await stopServer('SIGKILL');
  assert.ok(!stdout.includes(`line ${LINES}\n`), 'the turn was still running when the server died');
  await startServer();

  const code = await done;
  assert.equal(code, 0, stderr);
  assert.equal(stdout, Array.from({ length: LINES }, (_, i) => `line ${i + 1}\n`).join(''));
  assert.match(stderr, /reconnecting/);
  assert.match(stderr, /\[reattach\] done/);
});
