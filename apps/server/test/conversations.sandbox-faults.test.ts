// The sandbox backend failing (spec, outbound interface rules 7–8; limits "Sandbox retry"): a
// fault-injecting proxy (helpers/sandbox-fault-proxy.ts) sits between the server and the real
// sandboxd, and every conversation goes through the public API with the scripted runtime.
//
// - Provisioning calls are retried on 5xx, 429, timeouts and dropped sockets, 3 attempts in all,
//   with a growing, jittered backoff; a 429's retry_after_seconds is waited.
// - A fault that outlasts the 3 attempts fails the provisioning with a clear reason after exactly 3,
//   and the sandbox is destroyed: none is left on the backend, even one the backend created while
//   its answer was lost, or one a retry made after the conversation was deleted.
// - A command is never started twice: a command's exec upgrade whose answer was lost is not retried.
// - Calls off the provisioning path (the turn's exec) are tried once; another 4xx fails at once.
// - A destroy the backend answers 5xx is queued and retried until the sandbox is gone.
// Waits are asserted by their lower bounds only (the jitter draws each between half and all of its
// step); nothing here bounds how long a call may take.
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { type ConversationHarness, startConversationHarness, waitUntil } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';
import {
  type RequestMatcher,
  type SandboxFaultProxy,
  type SeenRequest,
  startSandboxFaultProxy,
} from './helpers/sandbox-fault-proxy.ts';

/** The server's REST deadline: small, so that a hung call ends soon (not so small that a slow machine trips it). */
const TIMEOUT_MS = 2500;
/** The client's retry policy (packages/sandbox-client/src/retry.ts): 250 ms before the 2nd attempt, doubling. */
const BASE_DELAY_MS = 250;

let h: ConversationHarness;
let proxy: SandboxFaultProxy;
let user: TestUser;
let agent: string;

before(async () => {
  h = await startConversationHarness({
    env: { SANDBOX_TIMEOUT_MS: String(TIMEOUT_MS) },
    sandboxUrl: async (backend) => {
      proxy = await startSandboxFaultProxy(backend);
      return proxy.url;
    },
  });
});
after(async () => {
  await h?.close();
  await proxy?.close();
});
beforeEach(async () => {
  user = await h.user();
  agent = await h.agent(user);
});
afterEach(() => {
  proxy.clearFaults();
});

const CREATE: RequestMatcher = { method: 'POST', path: '/v1/sandboxes' };
const sandboxPath = (name: string) => `/v1/sandboxes/${name}`;
const ofSandbox = (name: string, method: string, tail = ''): RequestMatcher => ({
  method,
  path: sandboxPath(name) + tail,
});
/** Requests seen since `since` (performance.now() ms). */
const seenSince = (since: number, matcher: RequestMatcher): SeenRequest[] =>
  proxy.seen(matcher).filter((r) => r.at >= since);
const gaps = (requests: SeenRequest[]): number[] =>
  requests.slice(1).map((r, i) => r.at - (requests[i] as SeenRequest).at);

describe('transient backend faults on the provisioning path', () => {
  it('503 then 429 on create, a timeout then a dropped socket on the env file: provisioned, attempts as the spec says', async () => {
    const since = performance.now();
    proxy.fault({ ...CREATE, nth: [1] }, { kind: 'status', status: 503 });
    proxy.fault({ ...CREATE, nth: [2] }, { kind: 'rate-limit', retryAfterSeconds: 1 });
    const write = { method: 'PUT', path: /^\/v1\/sandboxes\/[^/]+\/fs\/write$/ };
    proxy.fault({ ...write, nth: [1] }, { kind: 'hang' });
    proxy.fault({ ...write, nth: [2] }, { kind: 'drop-response' });

    const conv = await h.start(user, { agent_id: agent, prompt: 'echo provisioned' });
    const idle = await h.waitFor(user, conv.id, (c) => c.status === 'idle' || c.status === 'failed', 60_000);
    assert.equal(idle.status, 'idle', `provisioning succeeded: ${idle.failure_reason}`);
    assert.equal(idle.sandbox?.status, 'ready');
    const name = idle.sandbox?.name;
    assert.ok(name);
    assert.equal(await h.stdout(conv.id), 'provisioned\n');

    const creates = seenSince(since, CREATE);
    assert.deepEqual(
      creates.map((r) => r.fault),
      ['status', 'rate-limit', null],
      'create: 3 attempts, the third forwarded',
    );
    const [beforeSecond, beforeThird] = gaps(creates) as [number, number];
    assert.ok(beforeSecond >= BASE_DELAY_MS / 2, `backoff after the 503: ${beforeSecond} ms`);
    assert.ok(beforeThird >= 1000, `the 429's retry_after_seconds (1 s) was waited: ${beforeThird} ms`);

    const writes = seenSince(since, ofSandbox(name, 'PUT', '/fs/write'));
    assert.deepEqual(
      writes.map((r) => r.fault),
      ['hang', 'drop-response', null],
      'env file: 3 attempts',
    );
    const [afterTimeout, afterDrop] = gaps(writes) as [number, number];
    assert.ok(
      afterTimeout >= TIMEOUT_MS + BASE_DELAY_MS / 2,
      `the deadline, then the backoff: ${afterTimeout} ms`,
    );
    assert.ok(afterDrop >= BASE_DELAY_MS, `the backoff doubled after the second failure: ${afterDrop} ms`);

    // One sandbox for the conversation: the retries adopted, never made another.
    assert.deepEqual(
      (await h.backendSandboxes()).filter((n) => n === name),
      [name],
    );
  });
});

describe('transient backend faults on the provisioning path, with an environment', () => {
  it('502 then 500 on the network policy, 502 on the setup exec upgrade: retried, the backoff doubles, setup ran once', async () => {
    const environment = await h.environment(user, {
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['example.com'] },
      setup_script: 'echo setup-ran >> /home/sandbox/setup-runs\n',
    });
    const withEnv = await h.agent(user, { environment_id: environment });
    const policy = { method: 'POST', path: /^\/v1\/sandboxes\/[^/]+\/policy\/network$/ };
    const isSetup = (r: SeenRequest) => r.upgrade && r.query.getAll('cmd').includes('paddock-setup');
    const since = performance.now();
    proxy.fault({ ...policy, nth: [1] }, { kind: 'status', status: 502 });
    proxy.fault({ ...policy, nth: [2] }, { kind: 'status', status: 500 });
    proxy.fault({ where: isSetup, nth: [1] }, { kind: 'status', status: 502 });

    const conv = await h.start(user, { agent_id: withEnv, prompt: 'cat /home/sandbox/setup-runs' });
    const idle = await h.waitFor(user, conv.id, (c) => c.status === 'idle' || c.status === 'failed', 60_000);
    assert.equal(idle.status, 'idle', `provisioning succeeded: ${idle.failure_reason}`);
    const name = idle.sandbox?.name;
    assert.ok(name);
    assert.equal(await h.stdout(conv.id), 'setup-ran\n', 'the setup script ran exactly once');

    const policies = seenSince(since, ofSandbox(name, 'POST', '/policy/network'));
    assert.deepEqual(
      policies.map((r) => r.fault),
      ['status', 'status', null],
    );
    // Each wait is drawn between half and all of its exponential step: 250 ms, then 500 ms.
    const [first, second] = gaps(policies) as [number, number];
    assert.ok(first >= BASE_DELAY_MS / 2, `first backoff ${first} ms`);
    assert.ok(second >= BASE_DELAY_MS, `second backoff ${second} ms (doubled)`);
    const setups = seenSince(since, { where: isSetup });
    assert.deepEqual(
      setups.map((r) => r.fault),
      ['status', null],
      'the refused upgrade was tried again; the command started once',
    );
  });

  it('the create answer lost once: the retry adopts the sandbox the backend made, no second one', async () => {
    const since = performance.now();
    proxy.fault({ ...CREATE, nth: [1] }, { kind: 'drop-response' });
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo adopted' });
    const idle = await h.waitFor(user, conv.id, (c) => c.status === 'idle' || c.status === 'failed', 60_000);
    assert.equal(idle.status, 'idle', `provisioning succeeded: ${idle.failure_reason}`);
    const name = idle.sandbox?.name;
    assert.ok(name);
    assert.equal(await h.stdout(conv.id), 'adopted\n');
    assert.deepEqual(
      seenSince(since, CREATE).map((r) => r.fault),
      ['drop-response', null],
      'the second attempt met the existing sandbox (409) and adopted it',
    );
    assert.equal(
      seenSince(since, ofSandbox(name, 'GET')).filter((r) => !r.upgrade).length,
      1,
      'one GET: the adoption',
    );
    assert.equal((await sandboxRows(conv.id)).length, 1);
    assert.equal((await h.backendSandboxes()).filter((n) => n === name).length, 1);
  });
});

/** The sandbox rows of a conversation (every one, live or not). */
async function sandboxRows(conversationId: string) {
  return await h.deps.db
    .selectFrom('sandboxes')
    .select(['name', 'status', 'reason'])
    .where('conversation_id', '=', conversationId)
    .execute();
}

async function queuedDestroy(name: string) {
  const { rows } = await sql<{ attempts: number; last_error: string | null }>`
    SELECT attempts, last_error FROM sandbox_destroys WHERE name = ${name}`.execute(h.deps.db);
  return rows[0];
}

/**
 * Starts a conversation whose provisioning must fail; waits for `failed`, then checks that nothing
 * of it is left: its sandbox row is terminal, the backend has no sandbox of that name and no destroy
 * is still owed. Returns the conversation and its sandbox's name.
 */
async function failedProvisioning(prompt = 'echo never') {
  const conv = await h.start(user, { agent_id: agent, prompt });
  const failed = await h.waitFor(
    user,
    conv.id,
    (c) => c.status !== 'pending' && c.status !== 'running',
    60_000,
  );
  assert.equal(failed.status, 'failed', 'provisioning failed the conversation');
  assert.ok(failed.failure_reason, 'with a reason');
  const name = failed.sandbox?.name;
  assert.ok(name);
  assert.equal(failed.sandbox?.status, 'failed', 'the sandbox row is terminal');
  const rows = await sandboxRows(conv.id);
  assert.deepEqual(
    rows.map((r) => r.status),
    ['failed'],
    'one sandbox row, terminal',
  );
  // No orphan: the failed provision's sandbox is destroyed (or was never made), nothing owed.
  await waitUntil(async () => (await queuedDestroy(name)) === undefined, 10_000);
  assert.ok(!(await h.backendSandboxes()).includes(name), `no sandbox ${name} left on the backend`);
  assert.equal((await h.turns(user, conv.id))[0]?.status, 'failed', 'the first turn failed with it');
  return { conv: failed, name };
}

describe('a fault that outlasts the retries', () => {
  it('503 on every env file write: exactly 3 attempts, a clear reason, the created sandbox destroyed', async () => {
    const since = performance.now();
    const write = { method: 'PUT', path: /^\/v1\/sandboxes\/[^/]+\/fs\/write$/ };
    proxy.fault(write, { kind: 'status', status: 503 });
    const { conv, name } = await failedProvisioning();
    assert.match(conv.failure_reason ?? '', /write file answered 503/, conv.failure_reason ?? '');
    assert.equal(seenSince(since, ofSandbox(name, 'PUT', '/fs/write')).length, 3, 'exactly 3 attempts');
    assert.equal(seenSince(since, CREATE).length, 1, 'the create succeeded at once');
    // The backend did have the sandbox: it was destroyed, by a DELETE the backend answered.
    const deletes = seenSince(since, ofSandbox(name, 'DELETE'));
    assert.ok(deletes.length >= 1 && deletes.every((r) => r.fault === null));
    const stage = (await h.events(conv.id)).find((e) => e.stage === 'provision' && e.state === 'failed');
    assert.match(stage?.message ?? '', /write file answered 503/, 'the provision stage says why');
  });

  it('429 on every create: 3 attempts, each after retry_after_seconds, the reason names the rate limit', async () => {
    const since = performance.now();
    proxy.fault(CREATE, { kind: 'rate-limit', retryAfterSeconds: 1 });
    const { conv, name } = await failedProvisioning();
    assert.match(conv.failure_reason ?? '', /429 sandbox_creation_rate_limited/, conv.failure_reason ?? '');
    const creates = seenSince(since, CREATE);
    assert.equal(creates.length, 3, 'exactly 3 attempts');
    for (const gap of gaps(creates)) assert.ok(gap >= 1000, `retry_after_seconds waited: ${gap} ms`);
    assert.equal(
      seenSince(since, { path: new RegExp(`^${sandboxPath(name)}/`) }).length,
      0,
      'nothing else was tried',
    );
  });

  it('every create answer lost after the backend made the sandbox: 3 attempts, the sandbox destroyed (no orphan)', async () => {
    const since = performance.now();
    proxy.fault(CREATE, { kind: 'drop-response' });
    const { conv, name } = await failedProvisioning();
    assert.equal(seenSince(since, CREATE).length, 3, 'exactly 3 attempts');
    assert.match(conv.failure_reason ?? '', /create sandbox failed/, conv.failure_reason ?? '');
    // The first attempt reached the backend, which made the sandbox: only a destroy by name removes it.
    assert.ok(
      seenSince(since, ofSandbox(name, 'DELETE')).some((r) => r.fault === null),
      'destroyed by name',
    );
  });

  it('a hung env file write every time: 3 deadlines, then the reason says the backend did not answer', async () => {
    const since = performance.now();
    proxy.fault({ method: 'PUT', path: /\/fs\/write$/ }, { kind: 'hang' });
    const { conv, name } = await failedProvisioning();
    const writes = seenSince(since, ofSandbox(name, 'PUT', '/fs/write'));
    assert.equal(writes.length, 3, 'exactly 3 attempts');
    for (const gap of gaps(writes))
      assert.ok(gap >= TIMEOUT_MS, `each attempt waited its deadline: ${gap} ms`);
    assert.match(conv.failure_reason ?? '', /did not answer in time/, conv.failure_reason ?? '');
  });
});

describe('a conversation deleted while its provisioning waits out a fault', () => {
  it('the sandbox the retried create made afterwards is destroyed, nothing owed', async () => {
    const since = performance.now();
    proxy.fault({ ...CREATE, nth: [1] }, { kind: 'rate-limit', retryAfterSeconds: 2 });
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo never' });
    await waitUntil(async () => seenSince(since, CREATE).length === 1);
    const name = (await h.get(user, conv.id)).sandbox?.name;
    assert.ok(name);
    // Deleted during the 2 s wait: the delete's destroy finds nothing yet (404 counts as done)...
    assert.equal((await h.api(user, 'DELETE', `/api/conversations/${conv.id}`)).status, 204);
    // ...then the retry creates the sandbox; the cancelled provisioning must destroy it.
    await waitUntil(async () => seenSince(since, CREATE).length === 2, 20_000);
    await waitUntil(
      async () =>
        seenSince(since, ofSandbox(name, 'DELETE')).length >= 2 &&
        !(await h.backendSandboxes()).includes(name),
      20_000,
    );
    assert.equal(await queuedDestroy(name), undefined, 'no destroy left owed');
    assert.equal(seenSince(since, CREATE).length, 2, 'no further create');
  });
});

describe('failures that are not retried', () => {
  it('the turn exec (not the provisioning path) answered 503: tried once, the turn fails', async () => {
    const marker = `turn-${Math.random().toString(36).slice(2)}`;
    const isTurn = (r: SeenRequest) => r.upgrade && r.query.getAll('cmd').some((c) => c.includes(marker));
    const since = performance.now();
    proxy.fault({ method: 'GET', where: isTurn }, { kind: 'status', status: 503 });
    const conv = await h.start(user, { agent_id: agent, prompt: `echo ${marker}` });
    const turn = await h.waitForTurn(user, conv.id, 1, 60_000);
    assert.equal(turn.status, 'failed');
    assert.match(turn.error ?? '', /could not be started in the sandbox/);
    assert.equal(seenSince(since, { where: isTurn }).length, 1, 'one attempt');
    assert.equal(await h.stdout(conv.id), '', 'the turn never ran');
    // The provisioning before it was not disturbed: the sandbox is still there, ready.
    const after = await h.get(user, conv.id);
    assert.equal(after.status, 'idle', 'the conversation takes the next prompt');
    assert.equal(after.sandbox?.status, 'ready');
  });

  it('the turn exec socket dropped mid-request: tried once', async () => {
    const marker = `turn-${Math.random().toString(36).slice(2)}`;
    const isTurn = (r: SeenRequest) => r.upgrade && r.query.getAll('cmd').some((c) => c.includes(marker));
    const since = performance.now();
    proxy.fault({ method: 'GET', where: isTurn }, { kind: 'drop-request' });
    const conv = await h.start(user, { agent_id: agent, prompt: `echo ${marker}` });
    const turn = await h.waitForTurn(user, conv.id, 1, 60_000);
    assert.equal(turn.status, 'failed');
    assert.equal(seenSince(since, { where: isTurn }).length, 1, 'one attempt');
  });

  it('the setup exec upgrade answer lost (the command may have started): not run again', async () => {
    // The backend got the upgrade and started the script; the client cannot know it did. Retrying
    // would run the setup script a second time (regression: it did, and the first run was killed
    // half-way by the dropped socket).
    const environment = await h.environment(user, {
      setup_script: 'echo setup-ran >> /home/sandbox/setup-runs\n',
    });
    const withEnv = await h.agent(user, { environment_id: environment });
    const isSetup = (r: SeenRequest) => r.upgrade && r.query.getAll('cmd').includes('paddock-setup');
    const since = performance.now();
    proxy.fault({ where: isSetup, nth: [1] }, { kind: 'drop-response' });
    agent = withEnv;
    const { conv } = await failedProvisioning();
    assert.equal(
      seenSince(since, { where: isSetup }).length,
      1,
      'one upgrade: the script was not started again',
    );
    assert.match(
      conv.failure_reason ?? '',
      /setup stage failed: .*exec \(stream\) failed/,
      conv.failure_reason ?? '',
    );
  });

  it('403 on create (a 4xx other than 429) fails fast: one attempt', async () => {
    const since = performance.now();
    proxy.fault(CREATE, {
      kind: 'status',
      status: 403,
      body: { error: 'forbidden', message: 'token refused' },
    });
    const { conv } = await failedProvisioning();
    assert.equal(seenSince(since, CREATE).length, 1, 'one attempt, no retry');
    assert.match(
      conv.failure_reason ?? '',
      /create sandbox answered 403 forbidden/,
      conv.failure_reason ?? '',
    );
  });

  it('400 on the env file write fails fast: one attempt, the created sandbox destroyed', async () => {
    const since = performance.now();
    proxy.fault(
      { method: 'PUT', path: /\/fs\/write$/ },
      { kind: 'status', status: 400, body: { error: 'bad_path' } },
    );
    const { conv, name } = await failedProvisioning();
    assert.equal(seenSince(since, ofSandbox(name, 'PUT', '/fs/write')).length, 1, 'one attempt, no retry');
    assert.match(conv.failure_reason ?? '', /answered 400 bad_path/, conv.failure_reason ?? '');
  });
});

describe('a destroy the backend answers 5xx', () => {
  it('is queued, retried by the lifecycle clock, and the sandbox is finally gone', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo hi' });
    const idle = await h.waitFor(
      user,
      conv.id,
      (c) => c.status === 'idle' && c.sandbox?.status === 'ready',
      60_000,
    );
    const name = idle.sandbox?.name;
    assert.ok(name);
    const since = performance.now();
    const removeFault = proxy.fault(ofSandbox(name, 'DELETE'), { kind: 'status', status: 500 });

    // Terminate: the conversation's server destroys its sandbox (one destroy call, 3 attempts).
    assert.equal((await h.api(user, 'POST', `/api/conversations/${conv.id}/terminate`)).status, 200);
    await h.waitFor(user, conv.id, (c) => c.status === 'terminated' && c.sandbox?.status === 'terminated');
    await waitUntil(async () => (await queuedDestroy(name)) !== undefined);
    assert.deepEqual(
      seenSince(since, ofSandbox(name, 'DELETE')).map((r) => r.fault),
      ['status', 'status', 'status'],
      'the destroy call retried: 3 attempts, then the name was queued',
    );
    const first = await queuedDestroy(name);
    assert.equal(first?.attempts, 0);
    assert.match(first?.last_error ?? '', /destroy sandbox answered 500/);
    assert.ok((await h.backendSandboxes()).includes(name), 'still on the backend');

    // Due, still failing: another round of 3, the row stays.
    await sql`UPDATE sandbox_destroys SET next_at = now() WHERE name = ${name}`.execute(h.deps.db);
    await h.deps.conversationEngine.tick();
    assert.equal(seenSince(since, ofSandbox(name, 'DELETE')).length, 6);
    assert.equal((await queuedDestroy(name))?.attempts, 1);

    // The backend recovers: the next due retry destroys it and forgets the name.
    removeFault();
    await sql`UPDATE sandbox_destroys SET next_at = now() WHERE name = ${name}`.execute(h.deps.db);
    await h.deps.conversationEngine.tick();
    assert.equal(await queuedDestroy(name), undefined, 'the row goes once the backend confirmed');
    assert.ok(!(await h.backendSandboxes()).includes(name), 'the sandbox is gone');
    assert.equal(seenSince(since, ofSandbox(name, 'DELETE')).at(-1)?.fault, null);
  });
});
