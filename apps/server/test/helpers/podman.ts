// What the deploy tests (deploy.kube-play.test.ts, deploy.compose.test.ts) share: whether podman can
// run here (in CI its absence fails the file, elsewhere the file skips saying why), podman with the
// project's containers.conf, the image build (scripts/build-images.sh from the self-made base) with
// the pruning of older `sha-*` tags, polling, and the API walk a deployment must pass (register, key,
// agent, a conversation whose turn runs in a sandbox of the containerised sandboxd).
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

export const run = promisify(execFile);
export const ROOT = resolve(import.meta.dirname, '../../../..');
export const CONTAINERS_CONF = join(ROOT, 'deploy/test/containers.conf');
/** The environment of every podman (and podman-compose) call: the project's containers.conf. */
export const PODMAN_ENV = { ...process.env, CONTAINERS_CONF };

const has = (cmd: string, arg: string) => spawnSync(cmd, [arg], { stdio: 'ignore' }).status === 0;

/**
 * Why the deploy test `file` cannot run here ('' when it can). A missing tool is an error everywhere:
 * scripts/ci-system-deps.sh installs podman, podman-compose and the rest, so a machine without them
 * is not set up, never a reason to skip. The one reason returned is an ordinary user outside CI:
 * these tests run rootful podman (the only mode this host's podman runs in: runc, cgroupfs), so as
 * an ordinary user they report skipped with that reason (README, docs/deploy.md); in CI, not being
 * root is an error too.
 */
export function podmanUnavailable(
  file: string,
  also: { command: string; versionArg: string }[] = [],
): string {
  const inCi = (process.env['CI'] ?? '') !== '' && process.env['CI'] !== 'false';
  for (const tool of [{ command: 'podman', versionArg: '--version' }, ...also])
    if (!has(tool.command, tool.versionArg))
      throw new Error(`${file}: ${tool.command} is not installed (scripts/ci-system-deps.sh installs it)`);
  if (process.getuid?.() === 0) return '';
  const reason = 'the deploy tests run podman as root (rootful podman, docs/deploy.md)';
  if (inCi) throw new Error(`${file}: ${reason}`);
  return reason;
}

export async function podman(args: string[], timeoutMs = 120_000): Promise<string> {
  const { stdout } = await run('podman', args, {
    env: PODMAN_ENV,
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/** The last lines a container wrote, stdout and stderr both (podman logs replays each on its own), or why not. */
export async function containerLogs(name: string, lines = 60): Promise<string> {
  return run('podman', ['logs', '--tail', String(lines), name], {
    env: PODMAN_ENV,
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    ({ stdout, stderr }) => `${stdout}${stderr}`,
    (err: Error) => err.message,
  );
}

export async function until<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`${what}: not within ${timeoutMs / 1000} s${last ? ` (last: ${String(last)})` : ''}`);
}

/** A loopback TCP port free right now (the kernel's pick). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

export interface BuiltImages {
  /** name:tag of each image built, keyed by the name's last part (paddock-server, paddock-sandboxd, paddock-postgres). */
  images: Record<string, string>;
  /** The `sha-…` tag of the server and sandboxd images. */
  tag: string;
  /** The older `sha-*` tags removed. */
  removed: string[];
}

/**
 * scripts/build-images.sh --make-base --postgres (cached after the first run; concurrent callers
 * take turns), then the older `sha-*` tags of the paddock images are removed so that a machine
 * that runs the tests at every commit does not fill up; the images just built, the base
 * (localhost/paddock-base, the build cache's root) and localhost/paddock-postgres:17 stay.
 */
export async function buildImages(): Promise<BuiltImages> {
  const built = await run(join(ROOT, 'scripts/build-images.sh'), ['--make-base', '--postgres'], {
    cwd: ROOT,
    env: PODMAN_ENV,
    timeout: 1_800_000,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((err: { stderr?: string; message: string }) => {
    throw new Error(`build-images.sh failed: ${err.message}\n${(err.stderr ?? '').slice(-4000)}`);
  });
  const images: Record<string, string> = {};
  for (const line of built.stdout.split('\n')) {
    const [word, name, tag] = line.split(' ');
    if (word === 'image' && name && tag) images[name.split('/').pop()!] = `${name}:${tag}`;
  }
  const server = images['paddock-server'];
  assert.ok(server && images['paddock-sandboxd'] && images['paddock-postgres'], built.stdout);
  const tag = server.slice(server.lastIndexOf(':') + 1);
  // Under build-images.sh's own lock: removing a tag while another test file's build reuses its
  // layers fails that build ("layer not known"; deploy.compose and deploy.kube-play run at once).
  const removed = await withBuildLock(() => pruneOlderShaTags([server, images['paddock-sandboxd']!]));
  return { images, tag, removed };
}

/** The lock scripts/build-images.sh takes for a build (the same file, the same `flock`). */
function buildLockPath(): string {
  const cache =
    process.env['PADDOCK_CACHE_DIR'] ||
    join(process.env['XDG_CACHE_HOME'] || join(homedir(), '.cache'), 'paddock');
  return join(cache, 'build-images.lock');
}

/** Runs `fn` while holding build-images.sh's lock (a `flock` child holds it until its stdin ends). */
async function withBuildLock<T>(fn: () => Promise<T>): Promise<T> {
  const holder = spawn('flock', [buildLockPath(), '-c', 'echo locked; exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((ok, fail) => {
      holder.once('error', fail);
      holder.once('exit', (code) => fail(new Error(`flock exited ${code} before taking the build lock`)));
      holder.stdout.once('data', () => ok());
    });
    return await fn();
  } finally {
    holder.stdin.end();
    if (holder.exitCode === null) await new Promise((done) => holder.once('exit', done));
  }
}

/**
 * Removes the `sha-*` tags of each given image's repository that name an image created before
 * it. Newer ones may be another checkout's run in progress; an image a container still uses is
 * refused by podman and kept (no --force). Returns the tags removed.
 */
export async function pruneOlderShaTags(current: string[]): Promise<string[]> {
  const removed: string[] = [];
  for (const image of current) {
    const repository = image.slice(0, image.lastIndexOf(':'));
    const [mine] = JSON.parse(await podman(['image', 'inspect', image])) as { Created: string }[];
    const createdAt = Date.parse(mine!.Created);
    const listed = await podman(['images', '--format', '{{.Repository}}:{{.Tag}} {{.ID}}', repository]);
    for (const line of listed.split('\n')) {
      const [ref] = line.split(' ');
      if (!ref || ref === image || !ref.startsWith(`${repository}:sha-`)) continue;
      const [other] = JSON.parse(await podman(['image', 'inspect', ref]).catch(() => '[]')) as {
        Created: string;
      }[];
      if (!other || Date.parse(other.Created) >= createdAt) continue;
      // Untags; the image (and its untagged layers) goes once no other tag or container holds it.
      if (
        await podman(['rmi', ref]).then(
          () => true,
          () => false,
        )
      )
        removed.push(ref);
    }
  }
  return removed;
}

export interface ApiWalk {
  /** The server's public base URL. */
  base: string;
  /** Words the sandboxed command echoes back (`hello from Linux <words>`). */
  words: string;
  /** Logs to attach when something does not happen in time. */
  logs: () => Promise<string>;
}

/**
 * Registers a user, mints an API key, creates an agent and runs a conversation whose first turn
 * runs `echo` in a real sandbox (the scripted runtime), then checks the turn's output.
 */
export async function registerAndConverse({ base, words, logs }: ApiWalk): Promise<void> {
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies of the API, checked field by field.
  type Json = any;
  const post = async (path: string, body: unknown, key?: string) => {
    const res = await fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const get = async (path: string, key: string) => {
    const res = await fetch(base + path, { headers: { authorization: `Bearer ${key}` } });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const email = `deploy-${randomBytes(4).toString('hex')}@example.com`;
  const passphrase = 'a long deploy test passphrase';
  const registered = await post('/api/auth/register', { email, password: passphrase });
  assert.ok([200, 201].includes(registered.status), JSON.stringify(registered));
  const token = await post('/api/auth/token', { email, password: passphrase, name: 'deploy-test' });
  assert.equal(token.status, 201, JSON.stringify(token));
  const key: string = token.body.key;
  const agent = await post(
    '/api/agents',
    { name: 'deploy-agent', model: 'anthropic/claude-sonnet-4-5', runtime: 'claude' },
    key,
  );
  assert.equal(agent.status, 201, JSON.stringify(agent));
  const started = await post(
    '/api/conversations',
    { agent_id: agent.body.id, prompt: `echo "hello from $(uname -s) ${words}"` },
    key,
  );
  assert.equal(started.status, 201, JSON.stringify(started));
  const id: string = started.body.id;
  const turn = await until('the first turn ends', 300_000, async () => {
    const turns = await get(`/api/conversations/${id}/turns`, key);
    const first = (turns.body.data as Json[]).find((t) => t.seq === 1);
    return first && !['queued', 'running'].includes(first.status) ? first : undefined;
  }).catch(async (err: Error) => {
    const conv = await get(`/api/conversations/${id}`, key).catch(() => null);
    throw new Error(`${err.message}\nconversation: ${JSON.stringify(conv?.body)}\n${await logs()}`);
  });
  const events = await get(`/api/conversations/${id}/events`, key);
  const text = JSON.stringify(events.body);
  assert.equal(turn.status, 'succeeded', `turn: ${JSON.stringify(turn)}\nevents: ${text.slice(0, 4000)}`);
  assert.ok(text.includes(`hello from Linux ${words}`), `events: ${text.slice(0, 4000)}`);
}
