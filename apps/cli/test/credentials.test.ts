// paddock credentials: the CLI as a child process against the real app on a loopback port.
// The key travels on standard input only: never in argv, never printed back.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildTestApp, type TestApp } from '../../server/test/helpers/app.ts';
import { createVerifiedUser, type TestUser } from '../../server/test/helpers/factories.ts';

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

function paddock(args: string[], stdin = ''): Promise<Run> {
  const home = mkdtempSync(join(tmpdir(), 'paddock-cli-creds-'));
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

const KEY = 'sk-ant-cli-stdin-key-Zt6Yb3';

describe('paddock credentials', () => {
  it('sets a key from standard input, lists it as set without showing it, and deletes it', async () => {
    const empty = await paddock(['credentials']);
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stdout, /anthropic\s+no\s+-\s+-/);

    const set = await paddock(
      ['credentials', 'set', 'anthropic', '--base-url', 'https://llm-gateway.example.com/anthropic'],
      `${KEY}\n`,
    );
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /Anthropic key set \(base URL https:\/\/llm-gateway\.example\.com\/anthropic\)/);
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(user.id), [
      { provider: 'anthropic', apiKey: KEY, baseUrl: 'https://llm-gateway.example.com/anthropic' },
    ]);

    const listed = await paddock(['credentials', 'list']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /anthropic\s+yes\s+https:\/\/llm-gateway\.example\.com\/anthropic/);
    assert.match(listed.stdout, /openai\s+no/);
    const asJson = await paddock(['-o', 'json', 'credentials']);
    assert.equal(JSON.parse(asJson.stdout)[0].set, true);
    for (const run of [set, listed, asJson]) assert.ok(!`${run.stdout}${run.stderr}`.includes(KEY));

    const deleted = await paddock(['credentials', 'delete', 'anthropic']);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /Anthropic key deleted/);
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(user.id), []);
    assert.equal((await paddock(['credentials', 'delete', 'anthropic'])).code, 0);
  });

  it('never takes the key as an argument, and refuses an empty key or an unknown provider', async () => {
    const asArg = await paddock(
      ['credentials', 'set', 'openai', 'sk-openai-in-argv-1234'],
      'sk-openai-from-stdin-1',
    );
    assert.notEqual(asArg.code, 0);
    assert.match(asArg.stderr, /too many arguments/);
    const empty = await paddock(['credentials', 'set', 'openai'], '\n');
    assert.equal(empty.code, 1);
    assert.match(empty.stderr, /no key given/);
    const unknown = await paddock(['credentials', 'set', 'mistral'], 'sk-some-key-12345');
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown provider "mistral": one of anthropic, openai, gemini/);
    assert.deepEqual(await t.deps.inferenceCredentials.forSandbox(user.id), []);
  });

  it("prints the server's field errors (422) without the key", async () => {
    const bad = await paddock(
      ['credentials', 'set', 'gemini', '--base-url', 'http://gateway.example.com'],
      'AIza-gemini-cli-key-999',
    );
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /base_url: must be https:\/\//);
    assert.ok(!bad.stderr.includes('AIza-gemini-cli-key-999'));
    // A gateway no sandbox can reach: the server says what the operator declares.
    const loopback = await paddock(
      ['credentials', 'set', 'anthropic', '--base-url', 'http://127.0.0.1:4555'],
      'sk-ant-cli-loopback-key-1',
    );
    assert.equal(loopback.code, 1);
    assert.match(
      loopback.stderr,
      /base_url: no sandbox can reach 127\.0\.0\.1: it is this machine, which sandboxes never reach directly\. The operator declares a service route for the gateway \(SANDBOXD_SERVICE_ROUTES=gateway\.internal=127\.0\.0\.1:4555\) and the base URL names it: http:\/\/gateway\.internal:4555/,
    );
    const short = await paddock(['credentials', 'set', 'gemini'], 'short');
    assert.equal(short.code, 1);
    assert.match(short.stderr, /api_key: must be at least 8 characters/);
  });
});
