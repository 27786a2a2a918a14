// `npm start` (scripts/dev-start.ts) never leaves its stack running unseen: when its terminal
// closes (the kernel sends the terminal's foreground process SIGHUP), and when it is killed
// outright, the server and sandboxd it started stop too (they would otherwise keep the port, the
// data directory and the sandboxes, and the next `npm start` would fail). The real script, the
// real server and sandboxd; the server's database is a test database (DATABASE_URL), so no
// embedded PostgreSQL is involved. A sandboxd that stops on its own meanwhile is started again.
// The operator's own service routes are kept beside npm start's paddock.internal: a model gateway
// on this host's loopback (the fake provider) answers a real agent turn through npm start's own
// sandboxd.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { removeCgroups } from '../../sandboxd/test/harness.ts';
import { sharedLayerDir } from '../../sandboxd/test/runtime-layer-cache.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createVerifiedUser } from './helpers/factories.ts';
import { PROVIDER_ENV, startFakeInference } from './helpers/fake-inference.ts';

const REPO = resolve(import.meta.dirname, '..', '..', '..');

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => ok(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

/** The state and parent pid of `pid`, or null when it is gone. */
function statOf(pid: number): { state: string; ppid: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: state ?? '', ppid: Number(ppid) };
  } catch {
    return null;
  }
}
const parentOf = (pid: number) => statOf(pid)?.ppid ?? null;

/** Every live descendant of `root`. */
function descendants(root: number): number[] {
  const all = readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
  const found: number[] = [];
  let frontier = [root];
  while (frontier.length > 0) {
    const next = all.filter((pid) => frontier.includes(parentOf(pid) ?? -1) && !found.includes(pid));
    found.push(...next);
    frontier = next;
  }
  return found;
}

/** Running (an exited process waiting to be reaped counts as gone). */
const alive = (pid: number) => {
  const stat = statOf(pid);
  return stat !== null && stat.state !== 'Z';
};

async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out: ${what}`);
}

interface Started {
  /** the script */
  top: ChildProcess;
  /** the server and sandboxd processes (and what they started), seen once the stack was up */
  stack: number[];
  output: () => string;
  /** the server's port */
  port: number;
  /** the test database it runs on; null when it runs its embedded PostgreSQL */
  db: TestDatabase | null;
  /** its PADDOCK_DATA_DIR */
  dataDir: string;
}

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** Whether `pid` is a sandboxd (its command line names sandboxd's main). */
function isSandboxd(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('apps/sandboxd/src/main.ts');
  } catch {
    return false;
  }
}

/** Whether the sandboxd at `url` answers its API. */
async function sandboxdServing(url: string): Promise<boolean> {
  const res = await fetch(`${url}/v1/sandboxes`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
  return res !== null && res.status < 500;
}

/**
 * Starts `npm start`'s script and waits until it serves. With `embedded`, as a user runs it: no
 * DATABASE_URL, so the server starts the embedded PostgreSQL in the data directory. `env` adds to
 * (or overrides) the environment it starts with.
 */
async function startStack(
  options: { embedded?: boolean; env?: Record<string, string> } = {},
): Promise<Started> {
  const db: TestDatabase | null = options.embedded ? null : await createTestDatabase();
  if (db) cleanup.push(() => db.drop());
  const dataDir = mkdtempSync(join(tmpdir(), 'npm-start-'));
  cleanup.push(() => {
    // A sandboxd killed outright (kill -9) cannot remove its cgroup directories itself.
    removeCgroups(join(dataDir, 'sandboxd'));
    rmSync(dataDir, { recursive: true, force: true });
  });
  const port = await freePort();
  const { DATABASE_URL: _unused, ...inherited } = process.env;
  const env = {
    ...inherited,
    PORT: String(port),
    PADDOCK_DATA_DIR: dataDir,
    ...(db ? { DATABASE_URL: db.url, DATABASE_SSL: 'false' } : {}),
    SANDBOXD_RUNTIME_LAYER: 'off',
    LOG_LEVEL: 'warn',
    ...options.env,
  };
  const top = spawn(process.execPath, [join(REPO, 'scripts/dev-start.ts')], {
    cwd: REPO,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  top.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  top.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const stack: number[] = [];
  cleanup.push(() => {
    for (const pid of [top.pid ?? 0, ...stack, ...descendants(top.pid ?? 0)]) {
      try {
        if (pid > 0) process.kill(pid, 'SIGKILL');
      } catch {}
    }
  });
  let exited: string | null = null;
  top.once('exit', (code, signal) => {
    exited = String(code ?? signal);
  });
  try {
    await until(
      async () => {
        if (exited !== null) throw new Error(`npm start exited (${exited}) before serving`);
        const res = await fetch(`http://127.0.0.1:${port}/health`, {
          signal: AbortSignal.timeout(2000),
        }).catch(() => null);
        return res?.status === 200 && /sandboxd is serving/.test(output);
      },
      120_000,
      `npm start serving on ${port}`,
    );
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}; its output:\n${output}`);
  }
  stack.push(...descendants(top.pid ?? 0));
  const names = stack.map((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      return '';
    }
  });
  assert.ok(
    names.some((n) => n.includes('apps/server/src/main.ts')),
    `the server runs: ${names.join('\n')}`,
  );
  assert.ok(
    names.some((n) => n.includes('apps/sandboxd/src/main.ts')),
    `sandboxd runs: ${names.join('\n')}`,
  );
  return { top, stack, output: () => output, port, db, dataDir };
}

describe('npm start leaves nothing running when it goes', () => {
  it('its terminal closes (SIGHUP): the server and sandboxd stop, then the script', async () => {
    const { top, stack, output } = await startStack();
    process.kill(top.pid ?? 0, 'SIGHUP');
    await until(
      () => [top.pid ?? 0, ...stack].every((pid) => !alive(pid)),
      60_000,
      'everything stopped',
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; its output:\n${output()}`);
    });
  });

  it('sandboxd killed while the stack runs is started again on its address; the terminal closing still stops everything', async () => {
    const { top, stack, output } = await startStack();
    const url = /sandboxd is serving the sandbox interface on (\S+)/.exec(output())?.[1] ?? '';
    const first = stack.find(isSandboxd) ?? 0;
    let exitCode: number | null = null;
    top.once('exit', (code) => {
      exitCode = code;
    });
    process.kill(first, 'SIGKILL');
    await until(
      async () => {
        const again = descendants(top.pid ?? 0).find((pid) => pid !== first && isSandboxd(pid));
        return again !== undefined && (await sandboxdServing(url));
      },
      60_000,
      'sandboxd serving again',
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; its output:\n${output()}`);
    });
    assert.match(output(), /paddock: sandboxd stopped \(SIGKILL\); starting it again on the same address/);
    const now = descendants(top.pid ?? 0);
    process.kill(top.pid ?? 0, 'SIGHUP');
    await until(() => [top.pid ?? 0, ...now].every((pid) => !alive(pid)), 60_000, 'everything stopped').catch(
      (err: unknown) => {
        throw new Error(`${String(err)}; its output:\n${output()}`);
      },
    );
    await until(() => exitCode !== null, 10_000, 'the exit status');
    assert.equal(exitCode, 0, output());
    assert.doesNotMatch(output(), /unsettled top-level await/);
  });

  it('a sandboxd that keeps stopping is started again three times within a minute, then left down with the reason; the server stays up', async () => {
    const { top, stack, output, port } = await startStack();
    const url = /sandboxd is serving the sandbox interface on (\S+)/.exec(output())?.[1] ?? '';
    const serving = () => sandboxdServing(url);
    let current = stack.find(isSandboxd) ?? 0;
    const fail = (err: unknown) => {
      throw new Error(`${String(err)}; its output:\n${output()}`);
    };
    for (let restart = 1; restart <= 3; restart++) {
      const killed = current;
      process.kill(killed, 'SIGKILL');
      await until(
        async () => {
          const next = descendants(top.pid ?? 0).find((pid) => pid !== killed && isSandboxd(pid));
          if (!next || !(await serving())) return false;
          current = next;
          return true;
        },
        60_000,
        `sandboxd serving again (restart ${restart})`,
      ).catch(fail);
    }
    process.kill(current, 'SIGKILL');
    await until(
      () => /not starting it a 4th time within a minute/.test(output()),
      30_000,
      'the stack giving up on sandboxd',
    ).catch(fail);
    // Left down: no sandboxd comes back, and the server still answers.
    await new Promise((r) => setTimeout(r, 2000));
    assert.deepEqual(descendants(top.pid ?? 0).filter(isSandboxd), []);
    assert.equal(await serving(), false);
    const health = await fetch(`http://127.0.0.1:${port}/health`).catch(() => null);
    assert.equal(health?.status, 200, output());
    const now = descendants(top.pid ?? 0);
    process.kill(top.pid ?? 0, 'SIGHUP');
    await until(() => [top.pid ?? 0, ...now].every((pid) => !alive(pid)), 60_000, 'everything stopped').catch(
      fail,
    );
  });

  it('it is killed outright (kill -9): the server and sandboxd stop on their own', async () => {
    const { top, stack, output } = await startStack();
    process.kill(top.pid ?? 0, 'SIGKILL');
    await until(() => stack.every((pid) => !alive(pid)), 60_000, 'everything stopped').catch(
      (err: unknown) => {
        throw new Error(`${String(err)}; its output:\n${output()}`);
      },
    );
  });
});

describe('npm start keeps sandboxd when the server dies (issue 39, deliverable 6)', () => {
  it('the server killed outright mid-turn is started again; sandboxd and the turn stay up, and the turn ends whole', async () => {
    const fake = await startFakeInference();
    cleanup.push(() => fake.close());
    const { top, stack, port, output } = await startStack({
      embedded: true,
      env: { SANDBOXD_SERVICE_ROUTES: fake.serviceRoute, SANDBOXD_RUNTIME_LAYER: sharedLayerDir() },
    });
    const fail = (err: unknown): never => {
      throw new Error(`${String(err)}; its output:\n${output()}`);
    };
    const base = `http://127.0.0.1:${port}`;
    const email = `restart-${Date.now()}@example.com`;
    const password = 'a long enough passphrase 39';
    const post = (path: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    assert.equal((await post('/api/auth/register', { email, password })).status, 201);
    const minted = await post('/api/auth/token', { email, password });
    assert.equal(minted.status, 201, output());
    const { key } = (await minted.json()) as { key: string };
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }).catch(() => null);
      if (!res) return { status: 0, body: {} as Record<string, unknown> };
      return { status: res.status, body: (await res.json().catch(() => null)) as Record<string, unknown> };
    };
    assert.equal(
      (
        await api('PUT', '/api/account/inference-credentials/anthropic', {
          api_key: 'sk-ant-restart-key-Qw7Lp3',
          base_url: fake.sandboxUrl,
        })
      ).status,
      200,
    );
    const env = await api('POST', '/api/environments', {
      name: 'restart',
      env_vars: PROVIDER_ENV.claude.testEnv,
    });
    const agent = await api('POST', '/api/agents', {
      name: 'restart',
      runtime: 'claude',
      model: PROVIDER_ENV.claude.model,
      environment_id: env.body['id'],
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    // The tool call runs for a few seconds: the server is killed while it runs.
    fake.script('claude', {
      marker: 'NPM-START-RESTART',
      command: 'for i in $(seq 1 30); do echo restart-line-$i; sleep 0.2; done',
      reply: 'Finished after the restart.',
    });
    const conv = await api('POST', '/api/conversations', {
      agent_id: agent.body['id'],
      prompt: 'NPM-START-RESTART: count',
    });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id = String(conv.body['id']);
    await until(
      () => fake.requests().some((r) => r.text.includes('NPM-START-RESTART')),
      240_000,
      'the turn asking the model',
    ).catch(fail);

    const sandboxd = stack.find(isSandboxd) ?? 0;
    const isServer = (pid: number) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('apps/server/src/main.ts\0serve');
      } catch {
        return false;
      }
    };
    const first = descendants(top.pid ?? 0).find(isServer) ?? 0;
    assert.ok(first > 0 && sandboxd > 0);
    process.kill(first, 'SIGKILL');
    await until(
      async () => {
        const again = descendants(top.pid ?? 0).find((pid) => pid !== first && isServer(pid));
        if (!again) return false;
        const health = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
        return health?.status === 200;
      },
      90_000,
      'the server serving again',
    ).catch(fail);
    assert.match(output(), /paddock: the server stopped \(SIGKILL\); starting it again/);
    assert.ok(alive(sandboxd), 'the same sandboxd runs on');

    let turn: Record<string, unknown> | undefined;
    await until(
      async () => {
        const turns = await api('GET', `/api/conversations/${id}/turns`);
        turn = (turns.body['data'] as Record<string, unknown>[] | undefined)?.[0];
        return turn !== undefined && !['queued', 'running'].includes(String(turn['status']));
      },
      180_000,
      'the turn ending',
    ).catch(fail);
    assert.equal(turn?.['status'], 'succeeded', `${JSON.stringify(turn)}; its output:\n${output()}`);
    // The model got the command's whole output: the turn's process ran on through the restart.
    assert.ok(
      fake.requests().some((r) => r.text.includes('restart-line-1') && r.text.includes('restart-line-30')),
      'the tool result reached the model whole',
    );
    await api('DELETE', `/api/conversations/${id}`);
  });
});

describe('npm run replica joins the running npm start (issue 39, deliverable 7)', () => {
  it('refuses without a running stack, naming what to do; joins one: same database, keys and sandboxd, and Ctrl-C stops only the replica', async () => {
    const lone = mkdtempSync(join(tmpdir(), 'npm-replica-'));
    cleanup.push(() => rmSync(lone, { recursive: true, force: true }));
    const { DATABASE_URL: _unused, ...inherited } = process.env;
    const refused = spawnSync(process.execPath, [join(REPO, 'scripts/replica.ts')], {
      cwd: REPO,
      env: { ...inherited, PADDOCK_DATA_DIR: lone, PORT: String(await freePort()) },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /no npm start runs on .*: start it first \(npm start\)/);

    const { port, dataDir, output, top } = await startStack({ embedded: true });
    const fail = (err: unknown): never => {
      throw new Error(`${String(err)}; its output:\n${output()}`);
    };
    const same = spawnSync(process.execPath, [join(REPO, 'scripts/replica.ts')], {
      cwd: REPO,
      env: { ...inherited, PADDOCK_DATA_DIR: dataDir, PORT: String(port) },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(same.status, 1);
    assert.match(same.stderr, /PORT: \d+ is npm start's own server/);

    const replicaPort = await freePort();
    const replica = spawn(process.execPath, [join(REPO, 'scripts/replica.ts')], {
      cwd: REPO,
      env: { ...inherited, PADDOCK_DATA_DIR: dataDir, PORT: String(replicaPort), LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let replicaOut = '';
    replica.stdout?.on('data', (d: Buffer) => (replicaOut += d.toString()));
    replica.stderr?.on('data', (d: Buffer) => (replicaOut += d.toString()));
    cleanup.push(() => {
      if (replica.exitCode === null) replica.kill('SIGKILL');
    });
    const replicaBase = `http://127.0.0.1:${replicaPort}`;
    await until(
      async () =>
        (await fetch(`${replicaBase}/health/ready`, { signal: AbortSignal.timeout(2000) }).catch(() => null))
          ?.status === 200,
      90_000,
      'the replica ready',
    ).catch((err: unknown) => fail(`${String(err)}; the replica's output:\n${replicaOut}`));

    // An account made on npm start's server signs in on the replica, and what one writes the
    // other reads: one database.
    const email = `replica-${Date.now()}@example.com`;
    const password = 'a long enough passphrase 39';
    const registered = await fetch(`http://127.0.0.1:${port}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    assert.equal(registered.status, 201);
    const minted = await fetch(`${replicaBase}/api/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    assert.equal(minted.status, 201, replicaOut);
    const { key } = (await minted.json()) as { key: string };
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`http://127.0.0.1:${port}/api/environments`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'shared', env_vars: { WRITTEN_ON: 'npm-start' } }),
    });
    assert.equal(created.status, 201, await created.text());
    const listed = await fetch(`${replicaBase}/api/environments`, { headers: auth });
    assert.match(await listed.text(), /"name":"shared"/);

    replica.kill('SIGINT');
    await until(() => replica.exitCode !== null, 30_000, 'the replica stopping').catch(fail);
    assert.ok(alive(top.pid ?? 0), 'npm start runs on');
    const health = await fetch(`http://127.0.0.1:${port}/health/ready`).catch(() => null);
    assert.equal(health?.status, 200, output());
  });
});

describe("npm start keeps the operator's service routes", () => {
  it('a credential on a declared loopback name reaches a model gateway on 127.0.0.1 through its sandboxd; a loopback address is refused', async () => {
    const fake = await startFakeInference();
    cleanup.push(() => fake.close());
    const { port, db, output } = await startStack({
      env: { SANDBOXD_SERVICE_ROUTES: fake.serviceRoute, SANDBOXD_RUNTIME_LAYER: sharedLayerDir() },
    });
    assert.ok(db, 'the stack runs on a test database');
    const fail = (err: unknown): never => {
      throw new Error(`${String(err)}; its output:\n${output()}`);
    };
    const user = await createVerifiedUser(db.handle.db);
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { ...user.auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json().catch(() => null)) as Record<string, unknown> };
    };
    const KEY = 'sk-ant-local-gateway-key-Zr8Kp2';
    // The server reads the list npm start gave sandboxd: the gateway's own address is refused,
    // naming the declared route to use instead; that name is accepted.
    const direct = await api('PUT', '/api/account/inference-credentials/anthropic', {
      api_key: KEY,
      base_url: fake.url,
    });
    assert.equal(direct.status, 422, JSON.stringify(direct.body));
    // The operator routes a name to that address and port: the refusal names the URL to use.
    assert.match(
      JSON.stringify(direct.body),
      new RegExp(`the operator routes inference\\.test to it: use ${fake.sandboxUrl.replaceAll('.', '\\.')}`),
    );
    const set = await api('PUT', '/api/account/inference-credentials/anthropic', {
      api_key: KEY,
      base_url: fake.sandboxUrl,
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));

    const env = await api('POST', '/api/environments', {
      name: 'local-gateway',
      env_vars: PROVIDER_ENV.claude.testEnv,
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const agent = await api('POST', '/api/agents', {
      name: 'local-gateway',
      runtime: 'claude',
      model: PROVIDER_ENV.claude.model,
      environment_id: env.body['id'],
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    fake.script('claude', { marker: 'NPM-START-GATEWAY', reply: 'Answered by the local gateway.' });
    const conv = await api('POST', '/api/conversations', {
      agent_id: agent.body['id'],
      prompt: 'NPM-START-GATEWAY: say hello',
    });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id = String(conv.body['id']);
    let turn: Record<string, unknown> | undefined;
    await until(
      async () => {
        const turns = await api('GET', `/api/conversations/${id}/turns`);
        turn = (turns.body['data'] as Record<string, unknown>[] | undefined)?.[0];
        return turn !== undefined && !['queued', 'running'].includes(String(turn['status']));
      },
      240_000,
      'the turn ending',
    ).catch(fail);
    assert.equal(turn?.['status'], 'succeeded', `${JSON.stringify(turn)}; its output:\n${output()}`);
    assert.ok(
      fake.requests().some((r) => r.text.includes('NPM-START-GATEWAY')),
      'the gateway on 127.0.0.1 got the turn',
    );
    assert.ok(!output().includes(KEY));
    await api('DELETE', `/api/conversations/${id}`);
  });
});

describe('npm start refuses a malformed SANDBOXD_SERVICE_ROUTES', () => {
  it('stops before starting anything, naming the variable and the entry', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'npm-start-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const top = spawn(process.execPath, [join(REPO, 'scripts/dev-start.ts')], {
      cwd: REPO,
      env: {
        ...process.env,
        PORT: String(await freePort()),
        PADDOCK_DATA_DIR: dataDir,
        SANDBOXD_SERVICE_ROUTES: 'gateway.internal=127.0.0.1:4555 gateway-without-port',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    top.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    top.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((ok) => top.once('exit', ok));
    assert.equal(code, 1, output);
    assert.match(output, /paddock: SANDBOXD_SERVICE_ROUTES: entry 2 is not name=ip:port/);
    assert.doesNotMatch(output, /sandboxd is serving/);
  });
});

describe('release tasks run beside npm start (issue 37, finding 4)', () => {
  it('promote-admin, with only the data directory npm start uses, promotes an account on its embedded database', async () => {
    const { port, dataDir, output, top } = await startStack({ embedded: true });
    const base = `http://127.0.0.1:${port}`;
    const email = `first-${Date.now()}@example.com`;
    const password = 'a long enough passphrase 37';
    const registered = await fetch(`${base}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    assert.equal(registered.status, 201, `${await registered.text()}\n${output()}`);

    // What the README says to run: nothing but the data directory (here not the default one).
    const { DATABASE_URL: _unused, ...inherited } = process.env;
    const task = spawnSync(
      process.execPath,
      [join(REPO, 'apps/server/src/main.ts'), 'task', 'promote-admin', email],
      {
        cwd: REPO,
        env: { ...inherited, PADDOCK_DATA_DIR: dataDir, LOG_LEVEL: 'info' },
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    assert.equal(task.status, 0, `${task.stdout}${task.stderr}`);
    assert.match(task.stdout, new RegExp(`granted the admin role to ${email.replace('.', '\\.')}`));
    // It says it used the running database, and never that it was starting one.
    assert.match(
      `${task.stdout}${task.stderr}`,
      /using the embedded PostgreSQL of the Paddock running there/,
    );
    assert.doesNotMatch(`${task.stdout}${task.stderr}`, /starting the embedded PostgreSQL/);

    // The running server sees it, and still serves (the task left its database running).
    const minted = await fetch(`${base}/api/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    const body = await minted.text();
    assert.equal(minted.status, 201, body);
    const { key } = JSON.parse(body) as { key: string };
    const me = await fetch(`${base}/api/auth/me`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { is_admin: boolean }).is_admin, true);

    // Stopped as a person stops it: the server's own sessions end before its database stops,
    // so no "terminating connection" warning is printed on the way out.
    const exited = new Promise<void>((r) => top.once('exit', () => r()));
    process.kill(top.pid ?? 0, 'SIGHUP');
    await exited;
    assert.doesNotMatch(output(), /terminating connection due to administrator command/);
  });
});
