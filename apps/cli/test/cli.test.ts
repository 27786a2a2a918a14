// The paddock CLI as a child process against the real app listening on a loopback port.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildTestApp, type TestApp } from '../../server/test/helpers/app.ts';
import { createVerifiedUser, type TestUser } from '../../server/test/helpers/factories.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BIN = join(ROOT, 'apps', 'cli', 'bin', 'paddock.mjs');
const QUICKSTART = join(ROOT, 'examples', 'quickstart.yaml');
const FIRST_STEPS = join(ROOT, 'examples', 'first-steps.yaml');

let t: TestApp;
let url: string;
let user: TestUser;

before(async () => {
  t = await buildTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  user = await createVerifiedUser(t.deps.db);
});
/** Temporary directories this file makes; removed when it ends. */
const temps: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}
after(async () => {
  await t.close();
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function paddock(args: string[], env: Record<string, string | undefined> = {}, stdin?: string): Promise<Run> {
  const home = tempDir('paddock-cli-');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: {
        PATH: process.env['PATH'],
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'config'),
        PADDOCK_URL: url,
        PADDOCK_API_KEY: user.apiKey,
        ...env,
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
    child.stdin.end(stdin ?? '');
  });
}

const SECRET_ENV = {
  GITHUB_TOKEN: 'ghp_cli_test_token_value_123',
  ANTHROPIC_API_KEY: 'sk-ant-cli-test-value-456',
};

describe('paddock --version', () => {
  it('prints the version of the CLI package and exits 0, needing no server or config', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'apps', 'cli', 'package.json'), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V']) {
      const run = await paddock([flag], { PADDOCK_URL: undefined, PADDOCK_API_KEY: undefined });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, `${version}\n`);
      assert.equal(run.stderr, '');
    }
  });
});

describe('start-up', () => {
  it("keeps V8's compile cache in the user's cache directory (XDG_CACHE_HOME when set)", async () => {
    const home = tempDir('paddock-cli-home-');
    assert.equal((await paddock(['--version'], { HOME: home })).code, 0);
    assert.ok(readdirSync(join(home, '.cache', 'paddock', 'compile-cache')).length > 0);
    const xdg = tempDir('paddock-cli-cache-');
    assert.equal((await paddock(['--version'], { HOME: home, XDG_CACHE_HOME: xdg })).code, 0);
    assert.ok(readdirSync(join(xdg, 'paddock', 'compile-cache')).length > 0);
  });
});

describe('paddock apply', () => {
  it('creates the quickstart resources, then reports every resource unchanged on a second run', async () => {
    const first = await paddock(['apply', '-f', QUICKSTART], SECRET_ENV);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /Environment\s+node-web\s+created\s+GITHUB_TOKEN=created/);
    assert.match(first.stdout, /Vault\s+anthropic\s+created/);
    assert.match(first.stdout, /Agent\s+web-reviewer\s+created/);
    assert.match(first.stdout, /3 created, 0 updated, 0 unchanged, 0 failed/);

    const second = await paddock(['apply', '-f', QUICKSTART, '-o', 'json'], SECRET_ENV);
    assert.equal(second.code, 0, second.stderr);
    const body = JSON.parse(second.stdout) as { results: Array<{ action: string }> };
    assert.deepEqual(
      body.results.map((r) => r.action),
      ['unchanged', 'unchanged', 'unchanged'],
    );
    for (const run of [first, second]) {
      for (const v of Object.values(SECRET_ENV)) assert.ok(!(run.stdout + run.stderr).includes(v));
    }
    const merged = await t.deps.secrets.mergedEnv(user.id, {
      environmentId: (
        await t.deps.db
          .selectFrom('environments')
          .select('id')
          .where('tenant_id', '=', user.id)
          .executeTakeFirstOrThrow()
      ).id,
    });
    assert.equal(merged['GITHUB_TOKEN'], SECRET_ENV.GITHUB_TOKEN);
  });

  it('refuses an agent whose model its runtime cannot run, naming spec.model, and creates nothing (exit 1)', async () => {
    const other = await createVerifiedUser(t.deps.db);
    const file = join(tempDir('paddock-manifest-'), 'mismatch.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: paddock/v1',
        'kind: Agent',
        'metadata: {name: mismatched}',
        'spec: {runtime: codex, model: anthropic/claude-sonnet-4-5}',
      ].join('\n'),
    );
    const run = await paddock(['apply', '-f', file], { PADDOCK_API_KEY: other.apiKey });
    assert.equal(run.code, 1, run.stdout);
    assert.match(
      run.stderr,
      /^error: Agent mismatched: spec\.model: codex runs OpenAI models \(openai\/<model_id>\); anthropic\/claude-sonnet-4-5 is an Anthropic model: choose an OpenAI model, or the claude or opencode runtime$/m,
    );
    assert.match(run.stdout, /0 created, 0 updated, 0 unchanged, 1 failed/);
    const rows = await t.deps.db
      .selectFrom('agents')
      .select('id')
      .where('tenant_id', '=', other.id)
      .execute();
    assert.equal(rows.length, 0);
  });

  it('--dry-run prints the compiled plan without values and sends nothing', async () => {
    const other = await createVerifiedUser(t.deps.db);
    const run = await paddock(['apply', '-f', QUICKSTART, '--dry-run'], {
      ...SECRET_ENV,
      PADDOCK_API_KEY: other.apiKey,
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^# dry run: 3 resources, nothing sent$/m);
    assert.match(run.stdout, /GITHUB_TOKEN: <redacted>/);
    for (const v of Object.values(SECRET_ENV)) assert.ok(!run.stdout.includes(v));
    const single = join(tempDir('paddock-manifest-'), 'single.yaml');
    writeFileSync(single, 'apiVersion: paddock/v1\nkind: Vault\nmetadata: {name: lone}\n');
    const one = await paddock(['apply', '-f', single, '--dry-run'], { PADDOCK_API_KEY: other.apiKey });
    assert.equal(one.code, 0, one.stderr);
    assert.match(one.stdout, /^# dry run: 1 resource, nothing sent$/m, 'one resource, in the singular');
    const rows = await t.deps.db
      .selectFrom('environments')
      .select('id')
      .where('tenant_id', '=', other.id)
      .execute();
    assert.equal(rows.length, 0);
  });

  it('fails with field errors (exit 1) for a bad manifest, and lists every missing ${env:NAME}', async () => {
    const dir = tempDir('paddock-manifest-');
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      [
        'apiVersion: paddock/v1',
        'kind: Environment',
        'metadata: {name: broken}',
        'spec:',
        '  repos: [{url: "git@github.com:acme/x.git"}]',
        '---',
        'apiVersion: paddock/v1',
        'kind: Agent',
        'metadata: {name: wrong}',
        'spec: {model: nope, runtime: gpt}',
      ].join('\n'),
    );
    const run = await paddock(['apply', '-f', bad]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /Environment broken: spec\.repos\.0\.url: SSH/);
    assert.match(run.stderr, /Agent wrong: spec\.model/);
    assert.match(run.stderr, /Agent wrong: spec\.runtime/);

    const missing = await paddock(['apply', '-f', QUICKSTART]);
    assert.equal(missing.code, 1);
    assert.match(
      missing.stderr,
      /environment variables referenced as \$\{env:NAME\}: ANTHROPIC_API_KEY, GITHUB_TOKEN/,
    );
    const oneMissing = await paddock(['apply', '-f', QUICKSTART], { GITHUB_TOKEN: 'ghp_x' });
    assert.match(oneMissing.stderr, /environment variable referenced as \$\{env:NAME\}: ANTHROPIC_API_KEY$/m);

    const invalid = join(dir, 'invalid.yaml');
    writeFileSync(invalid, 'apiVersion: paddock/v1\nkind: Environment\nmetadata: {name: x\n');
    const yamlRun = await paddock(['apply', '-f', invalid]);
    assert.equal(yamlRun.code, 1);
    // Where the problem is, and no dangling colon before a source that is left out.
    assert.match(yamlRun.stderr, /invalid YAML: Flow map .* at line 4, column 1$/m);

    const leak = join(dir, 'leak.yaml');
    writeFileSync(
      leak,
      'apiVersion: paddock/v1\nkind: Environment\nmetadata: {name: x}\nspec: {env_vars: {A: "${env:HOME}"}}\n',
    );
    const leakRun = await paddock(['apply', '-f', leak]);
    assert.equal(leakRun.code, 1);
    assert.match(leakRun.stderr, /only allowed in secret values/);

    const absent = await paddock(['apply', '-f', join(dir, 'absent.yaml')]);
    assert.equal(absent.code, 1);
    assert.match(absent.stderr, /cannot read .*absent\.yaml: ENOENT/);
  });
});

describe('paddock get and delete', () => {
  it('lists as a table and as JSON, shows one by name, deletes by name', async () => {
    const u = await createVerifiedUser(t.deps.db);
    const env = { ...SECRET_ENV, PADDOCK_API_KEY: u.apiKey };
    assert.equal((await paddock(['apply', '-f', QUICKSTART], env)).code, 0);
    const list = await paddock(['get', 'environments'], env);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^NAME\s+ID\s+NETWORK\s+AGENTS\s+SECRETS\s+UPDATED/);
    assert.match(list.stdout, /node-web\s+\S+\s+limited\s+1\s+1/);
    const agents = JSON.parse((await paddock(['-o', 'json', 'get', 'agents'], env)).stdout) as Array<{
      name: string;
    }>;
    assert.deepEqual(
      agents.map((a) => a.name),
      ['web-reviewer'],
    );
    const one = await paddock(['get', 'agent', 'web-reviewer'], env);
    assert.match(one.stdout, /runtime: claude/);
    // One resource prints as the manifest document that applies back unchanged, not API fields.
    const dir = tempDir('paddock-get-');
    for (const [word, name] of [
      ['agent', 'web-reviewer'],
      ['environment', 'node-web'],
    ]) {
      const shown = await paddock(['get', word!, name!], env);
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(
        shown.stdout,
        /^apiVersion: paddock\/v1\nkind: (Agent|Environment)\nmetadata:\n {2}name: /,
      );
      assert.doesNotMatch(shown.stdout, /^(id|tenant_id|created_at|agent_count|secret_count):/m);
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, shown.stdout);
      const again = await paddock(['apply', '-f', file], env);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /0 created, 0 updated, 1 unchanged, 0 failed/);
    }
    const apiView = JSON.parse((await paddock(['-o', 'json', 'get', 'agent', 'web-reviewer'], env)).stdout);
    assert.match(String(apiView.id), /^[0-9a-f-]{36}$/);
    const refused = await paddock(['delete', 'environment', 'node-web'], env);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /used by 1 agent/);
    const deleted = await paddock(['delete', 'agents', 'web-reviewer'], env);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /deleted agent web-reviewer/);
    const gone = await paddock(['get', 'agents', 'web-reviewer'], env);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /agent "web-reviewer" not found/);
    const unknown = await paddock(['get', 'widgets'], env);
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.stderr, /unknown resource type/);
  });
});

describe('errors', () => {
  it('reports a refused key (401), a server that is down and a missing login clearly, with a non-zero exit', async () => {
    const refused = await paddock(['get', 'agents'], { PADDOCK_API_KEY: 'pdk_not_a_real_key' });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /refused the API key \(401\)/);
    const down = await paddock(['get', 'agents'], { PADDOCK_URL: 'http://127.0.0.1:9' });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /cannot reach the Paddock server at http:\/\/127\.0\.0\.1:9/);
    const anonymous = await paddock(['get', 'agents'], { PADDOCK_API_KEY: undefined });
    assert.equal(anonymous.code, 1);
    assert.match(anonymous.stderr, /not logged in/);
    for (const run of [refused, down, anonymous]) assert.ok(!/\n\s+at /.test(run.stderr), 'no stack trace');
  });
});

describe('paddock login and keys', () => {
  it('stores the key with mode 600 after --password-stdin, then manages API keys with it', async () => {
    const email = `cli-${randomBytes(4).toString('hex')}@example.com`;
    const password = `pw-${randomBytes(12).toString('hex')}-Long`;
    const registered = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email, password },
    });
    assert.equal(registered.statusCode, 201, registered.body);

    const home = tempDir('paddock-login-');
    const env = { XDG_CONFIG_HOME: home, PADDOCK_API_KEY: undefined, PADDOCK_URL: undefined };
    const wrong = await paddock(
      ['login', '--url', url, '--email', email, '--password-stdin'],
      env,
      'wrong-password\n',
    );
    assert.equal(wrong.code, 1);
    // The server's reason, not the "not logged in" of a command run without a key.
    assert.match(wrong.stderr, /^paddock: cannot sign in: invalid email or password\n/m);
    assert.doesNotMatch(wrong.stderr, /not logged in/);

    const login = await paddock(
      ['login', '--url', url, '--email', email, '--password-stdin'],
      env,
      `${password}\n`,
    );
    assert.equal(login.code, 0, login.stderr);
    assert.ok(!login.stdout.includes(password));
    assert.doesNotMatch(login.stderr, /warning/, 'plain http to this machine is fine');
    const file = join(home, 'paddock', 'config.json');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const stored = JSON.parse(readFileSync(file, 'utf8')) as { url: string; api_key: string };
    assert.equal(stored.url, url);
    assert.match(stored.api_key, /^pdk_/);

    const created = await paddock(['-o', 'json', 'keys', 'create', '--name', 'ci'], env);
    assert.equal(created.code, 0, created.stderr);
    const key = JSON.parse(created.stdout) as { id: string; key: string };
    assert.match(key.key, /^pdk_/);
    const listed = await paddock(['keys'], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^NAME\s+ID\s+PREFIX/);
    assert.match(listed.stdout, new RegExp(`ci\\s+${key.id}`));
    assert.ok(!listed.stdout.includes(key.key), 'a listed key shows its prefix only');
    const revoked = await paddock(['keys', 'revoke', key.id], env);
    assert.equal(revoked.code, 0, revoked.stderr);
    const useRevoked = await paddock(['get', 'agents'], {
      ...env,
      PADDOCK_URL: url,
      PADDOCK_API_KEY: key.key,
    });
    assert.equal(useRevoked.code, 1);
    assert.match(useRevoked.stderr, /401/);
  });
});

describe('paddock whoami and logout', () => {
  it('names the account, server and key source, then logout revokes the stored key and forgets it', async () => {
    const email = `who-${randomBytes(4).toString('hex')}@example.com`;
    const password = `pw-${randomBytes(12).toString('hex')}-Long`;
    const registered = await t.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      payload: { email, password },
    });
    assert.equal(registered.statusCode, 201, registered.body);
    const home = tempDir('paddock-whoami-');
    const env = { XDG_CONFIG_HOME: home, PADDOCK_API_KEY: undefined, PADDOCK_URL: undefined };
    const login = await paddock(
      ['login', '--url', url, '--email', email, '--password-stdin'],
      env,
      `${password}\n`,
    );
    assert.equal(login.code, 0, login.stderr);
    const file = join(home, 'paddock', 'config.json');
    const stored = JSON.parse(readFileSync(file, 'utf8')) as { api_key: string };

    const who = await paddock(['whoami'], env);
    assert.equal(who.code, 0, who.stderr);
    assert.equal(who.stdout, `${email} on ${url}, key ${stored.api_key.slice(0, 12)}… from ${file}\n`);
    assert.ok(!who.stdout.includes(stored.api_key), 'only the prefix of the key');
    const whoJson = JSON.parse((await paddock(['-o', 'json', 'whoami'], env)).stdout) as {
      user: { email: string };
    };
    assert.equal(whoJson.user.email, email);

    const out = await paddock(['logout'], env);
    assert.equal(out.code, 0, out.stderr);
    assert.match(
      out.stdout,
      /^Logged out: revoked key pdk_\S+… on http:\/\/127\.0\.0\.1:\d+; removed it from /,
    );
    const after = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    assert.deepEqual(after, { url });
    // The key is revoked on the server, not only forgotten here.
    const old = await paddock(['get', 'agents'], {
      ...env,
      PADDOCK_URL: url,
      PADDOCK_API_KEY: stored.api_key,
    });
    assert.equal(old.code, 1);
    assert.match(old.stderr, /401/);
    const anonymous = await paddock(['whoami'], env);
    assert.equal(anonymous.code, 1);
    assert.match(anonymous.stderr, /not logged in/);
    const again = await paddock(['logout'], env);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^Not logged in: no key is stored in /);
  });
});

describe('README first steps', () => {
  it("applies the README's first-steps example with nothing set in the shell", async () => {
    const first = await paddock(['apply', '-f', FIRST_STEPS]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /Environment\s+scratch\s+created/);
    assert.match(first.stdout, /Agent\s+helper\s+created/);
    const second = await paddock(['apply', '-f', FIRST_STEPS]);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /0 created, 0 updated, 2 unchanged, 0 failed/);
  });

  it('refuses the full quickstart without its secrets in the shell, naming each one', async () => {
    const run = await paddock(['apply', '-f', QUICKSTART]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /GITHUB_TOKEN/);
    assert.match(run.stderr, /ANTHROPIC_API_KEY/);
  });
});
