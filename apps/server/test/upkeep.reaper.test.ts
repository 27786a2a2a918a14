// The sandbox reaper (conversations/engine/sandbox-reaper.job.ts) against the real sandboxd:
// rows written straight into the tables around real backend sandboxes, the job driven with a
// chosen `now` just inside and just past each bound; a conversation the running engine owns;
// a listing whose second page fails (a loopback proxy in front of the real sandboxd); and the
// release task, run as its own process beside the running server.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createSandboxClient, type SandboxClient } from '@paddock/sandbox-client';
import { v7 as uuidv7 } from 'uuid';
import type { SandboxStatus } from '../src/conversations/conversations.tables.ts';
import { sandboxReaperJob } from '../src/conversations/engine/sandbox-reaper.job.ts';
import type { Deps } from '../src/deps.ts';
import type { JobResult } from '../src/jobs/scheduled-job.ts';
import { insertConversation } from './helpers/conversation-rows.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const MIN = 60_000;

let h: ConversationHarness;
let user: TestUser;
let backend: SandboxClient;
/** Every backend sandbox a test created, destroyed in after() whatever the reaper did. */
const created: string[] = [];
/** The rows' reference instant: each `now` below is T0 plus or minus a bound. */
const T0 = new Date(Math.floor(Date.now() / 1000) * 1000);

const name = (tag: string) => `paddock-${tag}-${randomBytes(4).toString('hex')}`;

async function backendSandbox(tag: string): Promise<string> {
  const n = name(tag);
  await backend.create(n);
  created.push(n);
  return n;
}

async function onBackend(): Promise<Set<string>> {
  return new Set((await backend.list()).map((s) => s.name));
}

/** A conversation and its sandbox row, written as a server that died would have left them. */
async function rows(options: {
  conversation: 'pending' | 'running' | 'idle';
  sandbox: SandboxStatus;
  sandboxName: string;
  createdAt: Date;
  lastActivityAt?: Date;
}): Promise<{ conversationId: string; sandboxId: string }> {
  const conversation = await insertConversation(h.deps.db, user.id, { status: options.conversation });
  await h.deps.db
    .updateTable('conversations')
    .set({ last_activity_at: options.lastActivityAt ?? options.createdAt })
    .where('id', '=', conversation.id)
    .execute();
  const sandboxId = uuidv7();
  await h.deps.db
    .insertInto('sandboxes')
    .values({
      id: sandboxId,
      tenant_id: user.id,
      conversation_id: conversation.id,
      name: options.sandboxName,
      status: options.sandbox,
      created_at: options.createdAt,
    })
    .execute();
  return { conversationId: conversation.id, sandboxId };
}

async function sandboxRow(id: string) {
  return await h.deps.db
    .selectFrom('sandboxes')
    .select(['status', 'reason'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
}

async function conversationRow(id: string) {
  return await h.deps.db
    .selectFrom('conversations')
    .select(['status', 'failure_reason'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
}

async function untracked(): Promise<string[]> {
  const list = await h.deps.db.selectFrom('untracked_sandboxes').select('name').orderBy('name').execute();
  return list.map((r) => r.name);
}

async function reap(
  now: Date,
  options: { dryRun?: boolean; deps?: Deps } = {},
): Promise<JobResult & { lines: string[] }> {
  const lines: string[] = [];
  const result = await sandboxReaperJob.run({
    deps: options.deps ?? h.deps,
    now,
    dryRun: options.dryRun ?? false,
    print: (line) => lines.push(line),
  });
  return { ...result, lines };
}

const line = (lines: string[], sandbox: string) => lines.find((l) => l.includes(sandbox));

/** The scenario's rows, set up once in before(). */
let owned: { id: string; sandbox: string };
let terminal: { name: string; sandboxId: string };
let stuck: { name: string; conversationId: string; sandboxId: string };
let abandoned: { name: string; conversationId: string; sandboxId: string };
let aged: { name: string; sandboxId: string };
let unsaved: { name: string; sandboxId: string };
let orphan: string;

before(async () => {
  // No lifecycle tick and no orphan probe during the tests (an hour each): the running engine
  // never adopts the rows below, which are written as no server owns them. (The probe's option
  // is spread in: an engine without a separate probe has no such option.)
  const HOUR = 3_600_000;
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: HOUR, ...{ orphanProbeMs: HOUR } } } });
  backend = createSandboxClient({ baseUrl: h.sandboxd.url, token: h.sandboxd.token });
  user = await h.user();
  const agent = await h.agent(user);

  const conv = await h.start(user, { agent_id: agent, prompt: 'echo hi' });
  const idle = await h.waitFor(user, conv.id, (c) => c.status === 'idle' && c.sandbox?.status === 'ready');
  owned = { id: conv.id, sandbox: idle.sandbox?.name ?? '' };
  assert.ok(owned.sandbox);
  assert.ok(await h.deps.ownershipProbe.isOwned(conv.id));

  const terminalName = await backendSandbox('terminal');
  terminal = {
    name: terminalName,
    sandboxId: (
      await rows({ conversation: 'idle', sandbox: 'terminated', sandboxName: terminalName, createdAt: T0 })
    ).sandboxId,
  };
  const stuckName = await backendSandbox('stuck');
  stuck = {
    name: stuckName,
    ...(await rows({ conversation: 'pending', sandbox: 'starting', sandboxName: stuckName, createdAt: T0 })),
  };
  const abandonedName = await backendSandbox('idle');
  abandoned = {
    name: abandonedName,
    ...(await rows({ conversation: 'idle', sandbox: 'ready', sandboxName: abandonedName, createdAt: T0 })),
  };
  // Created 23 hours before T0, active at T0: past the 24-hour lifetime before it is idle an hour.
  const agedName = await backendSandbox('aged');
  aged = {
    name: agedName,
    sandboxId: (
      await rows({
        conversation: 'idle',
        sandbox: 'ready',
        sandboxName: agedName,
        createdAt: new Date(T0.getTime() - 23 * 60 * MIN),
        lastActivityAt: T0,
      })
    ).sandboxId,
  };
  // Idle, but a turn ended after the last session save (never saved): reclaiming loses the session.
  const unsavedName = await backendSandbox('unsaved');
  const u = await rows({ conversation: 'idle', sandbox: 'ready', sandboxName: unsavedName, createdAt: T0 });
  await h.deps.db
    .insertInto('turns')
    .values({
      id: uuidv7(),
      tenant_id: user.id,
      conversation_id: u.conversationId,
      seq: 1,
      prompt: 'echo hi',
      status: 'succeeded',
      ended_at: T0,
    })
    .execute();
  unsaved = { name: unsavedName, sandboxId: u.sandboxId };
  orphan = await backendSandbox('orphan');
});

after(async () => {
  for (const n of created) await backend.destroy(n).catch(() => {});
  await h?.close();
});

describe('the sandbox reaper', () => {
  it('a listing whose second page fails acts on nothing, and says so', async () => {
    // More than a page (50) on the backend, so the listing needs a second page.
    const fillers: string[] = [];
    for (let i = 0; i < 5; i++) {
      fillers.push(...(await Promise.all(Array.from({ length: 10 }, () => backendSandbox('filler')))));
    }
    let secondPages = 0;
    const proxy: Server = createServer(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://proxy');
      if (
        req.method === 'GET' &&
        url.pathname === '/v1/sandboxes' &&
        url.searchParams.has('continuation_token')
      ) {
        secondPages += 1;
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end('{"error":"unavailable","message":"injected: the second page fails"}');
        return;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const upstream = await fetch(`${h.sandboxd.url}${req.url}`, {
        method: req.method ?? 'GET',
        headers: { authorization: req.headers.authorization ?? '' },
        ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      });
      res.writeHead(upstream.status, {
        'content-type': upstream.headers.get('content-type') ?? 'text/plain',
      });
      res.end(Buffer.from(await upstream.arrayBuffer()));
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const port = (proxy.address() as AddressInfo).port;
      const faulty = {
        ...h.deps,
        sandbox: createSandboxClient({ baseUrl: `http://127.0.0.1:${port}`, token: h.sandboxd.token }),
      };
      const before = await onBackend();
      const result = await reap(new Date(T0.getTime() + 25 * 60 * MIN), { deps: faulty });
      assert.ok(secondPages > 0, 'the listing asked for the second page');
      assert.equal(result.acted, 0);
      assert.equal(result.failures, 1);
      assert.match(result.summary, /listing failed: acted on nothing/);
      assert.match(result.lines.join('\n'), /acting on nothing/);
      // Everything as it was: every bound is long past at this `now`, and nothing moved.
      assert.equal((await sandboxRow(stuck.sandboxId)).status, 'starting');
      assert.equal((await sandboxRow(abandoned.sandboxId)).status, 'ready');
      assert.equal((await sandboxRow(aged.sandboxId)).status, 'ready');
      assert.deepEqual(await onBackend(), before, 'no backend sandbox was destroyed');
      assert.deepEqual(await untracked(), [], 'no sandbox was reported from half a listing');
    } finally {
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      await Promise.all(fillers.map((n) => backend.destroy(n)));
    }
  });

  it('a dry run says what it would do and changes nothing', async () => {
    const result = await reap(new Date(T0.getTime() + 61 * MIN), { dryRun: true });
    assert.match(line(result.lines, terminal.name) ?? '', /^would destroy /);
    assert.match(line(result.lines, stuck.name) ?? '', /^would free /);
    assert.match(line(result.lines, abandoned.name) ?? '', /^would expire /);
    assert.match(line(result.lines, orphan) ?? '', /^untracked /);
    assert.equal((await sandboxRow(stuck.sandboxId)).status, 'starting');
    assert.equal((await sandboxRow(abandoned.sandboxId)).status, 'ready');
    const now = await onBackend();
    for (const n of [terminal.name, stuck.name, abandoned.name, orphan]) assert.ok(now.has(n), n);
    assert.deepEqual(await untracked(), []);
  });

  it('just inside every bound: live rows untouched; a terminal row’s sandbox destroyed; an orphan reported and kept', async () => {
    // 29 minutes: inside the 30-minute provision deadline and the 60-minute idle timeout; the
    // aged sandbox is 23 h 29 min old, inside the 24-hour lifetime.
    const result = await reap(new Date(T0.getTime() + 29 * MIN));
    assert.equal(result.failures, 0, result.lines.join('\n'));
    assert.equal((await sandboxRow(stuck.sandboxId)).status, 'starting');
    assert.equal((await sandboxRow(abandoned.sandboxId)).status, 'ready');
    assert.equal((await sandboxRow(aged.sandboxId)).status, 'ready');
    const now = await onBackend();
    for (const n of [stuck.name, abandoned.name, aged.name, owned.sandbox])
      assert.ok(now.has(n), `${n} kept`);

    assert.ok(!now.has(terminal.name), 'the terminated row’s sandbox is destroyed');
    assert.match(line(result.lines, terminal.name) ?? '', /^destroyed .*terminated/);
    assert.equal((await sandboxRow(terminal.sandboxId)).status, 'terminated');

    assert.ok(now.has(orphan), 'the untracked sandbox is kept');
    assert.match(line(result.lines, orphan) ?? '', /^untracked .*kept/);
    assert.deepEqual(await untracked(), [orphan]);
    assert.match(
      await h.deps.metrics.registry.getSingleMetricAsString('paddock_untracked_sandboxes'),
      /paddock_untracked_sandboxes 1$/m,
    );
    assert.ok(
      h.logs.some((l) => l.includes(orphan) && l.includes('no row knows')),
      'logged',
    );

    // The admin page's report: the admin sees it; anyone else is refused.
    const admin = await createVerifiedUser(h.deps.db, { isAdmin: true });
    const report = await h.api(admin, 'GET', '/api/admin/untracked-sandboxes');
    assert.equal(report.status, 200);
    const reported = (report.body as { data: { name: string; first_seen_at: string }[] }).data;
    assert.deepEqual(
      reported.map((r) => r.name),
      [orphan],
    );
    assert.equal(reported[0]?.first_seen_at, new Date(T0.getTime() + 29 * MIN).toISOString());
    assert.equal((await h.api(user, 'GET', '/api/admin/untracked-sandboxes')).status, 403);
  });

  it('just past every bound: the stuck row freed, the abandoned and aged sandboxes expired; the owned and the unsaved kept', async () => {
    const result = await reap(new Date(T0.getTime() + 61 * MIN));
    assert.equal(result.failures, 0, result.lines.join('\n'));

    assert.deepEqual(await sandboxRow(stuck.sandboxId), {
      status: 'failed',
      reason: 'provisioning did not finish within 30 minutes',
    });
    assert.deepEqual(await conversationRow(stuck.conversationId), {
      status: 'failed',
      failure_reason: 'provisioning did not finish within 30 minutes',
    });
    assert.match(line(result.lines, stuck.name) ?? '', /^freed /);

    assert.deepEqual(await sandboxRow(abandoned.sandboxId), {
      status: 'terminated',
      reason: 'the sandbox was idle for 60 minutes',
    });
    assert.equal((await conversationRow(abandoned.conversationId)).status, 'idle', 'resumable');
    assert.match(line(result.lines, abandoned.name) ?? '', /^expired /);
    assert.deepEqual(await sandboxRow(aged.sandboxId), {
      status: 'terminated',
      reason: 'the sandbox reached its maximum lifetime of 24 hours',
    });

    assert.equal((await sandboxRow(unsaved.sandboxId)).status, 'ready');
    assert.match(line(result.lines, unsaved.name) ?? '', /^kept .*session is unsaved/);

    const now = await onBackend();
    for (const n of [stuck.name, abandoned.name, aged.name]) assert.ok(!now.has(n), `${n} destroyed`);
    assert.ok(now.has(unsaved.name));
    assert.ok(now.has(orphan), 'still reported, never destroyed');
    assert.deepEqual(await untracked(), [orphan]);

    // The conversation the engine owns is its server's to bound, even past every bound here.
    assert.ok(now.has(owned.sandbox));
    assert.equal(line(result.lines, owned.sandbox), undefined);
    const view = await h.get(user, owned.id);
    assert.equal(view.status, 'idle');
    assert.equal(view.sandbox?.status, 'ready');
    assert.ok(await h.deps.ownershipProbe.isOwned(owned.id), 'still owned by its server');
    assert.equal(result.acted, 3);
    // By action, this run's and the earlier one's (the terminal row's sandbox), as the metric counts them.
    const actions = (await h.deps.metrics.reaperActions.get()).values.map((v) => [v.labels.action, v.value]);
    assert.deepEqual(Object.fromEntries(actions), { destroyed: 1, freed: 1, expired: 2 });
  });

  it('twice is safe: a second run finds nothing more to do', async () => {
    const result = await reap(new Date(T0.getTime() + 61 * MIN));
    assert.equal(result.acted, 0);
    assert.equal(result.failures, 0);
    assert.deepEqual(await untracked(), [orphan]);
  });

  it('is a release task, run as its own process beside the running server', async () => {
    const env = {
      PATH: process.env['PATH'] ?? '',
      NODE_ENV: 'test',
      DATABASE_URL: h.database.url,
      DATABASE_SSL: 'false',
      MASTER_SECRETS_KEY: h.config.masterSecretsKey?.toString('base64url') ?? '',
      EMAIL_DELIVERY: 'none',
      SANDBOX_BASE_URL: h.sandboxd.url,
      SANDBOX_TOKEN: h.sandboxd.token,
      LOG_LEVEL: 'silent',
    };
    const list = await run(['tasks'], env);
    assert.equal(list.code, 0, list.stderr);
    for (const task of ['sandbox-reaper', 'retention-prune', 'throttle-sweep'])
      assert.match(list.stdout, new RegExp(`^${task} \\[--dry-run\\]`, 'm'));

    const dry = await run(['task', 'sandbox-reaper', '--dry-run'], env);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, new RegExp(`^untracked ${orphan}: `, 'm'));
    assert.match(dry.stdout, /^dry run: would destroy 0, free 0, expire 0 sandbox\(es\)/m);

    const bad = await run(['task', 'sandbox-reaper', '--now'], env);
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /unknown argument "--now"\nusage: paddock-server task sandbox-reaper \[--dry-run\]/,
    );
  });
});

function run(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
