// Issue 9, deliverable 7: one test per row of the spec's transition table (States and
// transitions), through the public API only, against the real sandboxd with the scripted
// runtime (the prompt is the turn's shell script).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { queueWarmTurn } from '../src/conversations/api/conversations.repo.ts';
import { type ConversationHarness, startConversationHarness, waitUntil } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
let user: TestUser;
let agent: string;
before(async () => {
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: 100 } } });
});
// A user per test: each test's sandboxes count against its own quota.
beforeEach(async () => {
  user = await h.user();
  agent = await h.agent(user);
});
after(async () => {
  await h.close();
});

const idle = (c: { status: string }) => c.status === 'idle';

/** Ages a conversation past SANDBOX_IDLE_TIMEOUT_MINUTES (60): the lifecycle clock reclaims its sandbox. */
async function idleFor61Minutes(conversationId: string): Promise<void> {
  await h.deps.db
    .updateTable('conversations')
    .set({ last_activity_at: new Date(Date.now() - 61 * 60_000) })
    .where('id', '=', conversationId)
    .execute();
}

describe('the transition table (States and transitions)', () => {
  it('(new) → pending: POST /api/conversations creates the conversation and a pending sandbox row', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo hi' });
    assert.equal(conv.status, 'pending');
    assert.equal(conv.sandbox?.status, 'pending');
    assert.match(
      conv.sandbox?.name ?? '',
      new RegExp(`^paddock-${user.id.replace(/-/g, '').slice(0, 8)}-[0-9a-f]{8}$`),
    );
    assert.equal(conv.source, 'api');
    assert.equal(conv.title, 'echo hi');
    await h.waitFor(user, conv.id, idle);
  });

  it('pending → running → idle: provisioning completes, the turn runs and exits, the sandbox stays warm', async () => {
    const conv = await h.start(user, {
      agent_id: agent,
      prompt: 'echo started; sleep 1; echo "$PADDOCK_CONVERSATION_ID"',
    });
    const running = await h.waitFor(user, conv.id, (c) => c.status === 'running');
    assert.equal(running.sandbox?.status, 'ready');
    const done = await h.waitFor(user, conv.id, idle);
    assert.equal(done.sandbox?.status, 'ready');
    assert.equal(done.unread, true);
    assert.equal(await h.stdout(conv.id), `started\n${conv.id}\n`);
    const [turn] = await h.turns(user, conv.id);
    assert.equal(turn?.status, 'succeeded');
    assert.equal(turn?.exit_code, 0);
    const stages = (await h.events(conv.id))
      .filter((e) => e.stream === 'stage')
      .map((e) => `${e.stage}:${e.state}`);
    assert.deepEqual(stages, ['provision:started', 'provision:done', 'turn:started', 'turn:done']);
    assert.ok((await h.backendSandboxes()).includes(done.sandbox?.name ?? ''));
  });

  it('running → idle with the turn failed when the runtime exits non-zero', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo oops >&2; exit 3' });
    await h.waitFor(user, conv.id, idle);
    const [turn] = await h.turns(user, conv.id);
    assert.equal(turn?.status, 'failed');
    assert.equal(turn?.exit_code, 3);
  });

  it('a client that sees a turn end on the stream may prompt at once: 202, never busy', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo 1' });
    const controller = new AbortController();
    const res = await fetch(`${h.url}/api/conversations/${conv.id}/stream?streams=stage`, {
      headers: { ...user.auth, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    const statuses: number[] = [];
    let text = '';
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        for (let cut = text.indexOf('\n\n'); cut >= 0; cut = text.indexOf('\n\n')) {
          const data = /(?:^|\n)data: (.*)/.exec(text.slice(0, cut))?.[1];
          text = text.slice(cut + 2);
          const event = data ? (JSON.parse(data) as { stage?: string; state?: string }) : {};
          if (event.stage !== 'turn' || event.state === 'started') continue;
          if (statuses.length === 4) break;
          const next = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
            prompt: `echo ${statuses.length + 2}`,
          });
          statuses.push(next.status);
          if (next.status !== 202) break; // no turn follows a refused prompt: fail now, not at the timeout
        }
        if (statuses.length === 4 || statuses.some((s) => s !== 202)) break;
      }
    } finally {
      controller.abort();
    }
    assert.deepEqual(statuses, [202, 202, 202, 202]);
    await h.waitForTurn(user, conv.id, 5);
  });

  it('idle → running on a follow-up prompt; the next turn sees the same sandbox', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo one > /home/sandbox/mark' });
    await h.waitFor(user, conv.id, idle);
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
      prompt: 'cat /home/sandbox/mark',
    });
    assert.equal(res.status, 202);
    assert.equal(res.body.turn.seq, 2);
    const turn = await h.waitForTurn(user, conv.id, 2);
    assert.equal(turn.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, turn.id), 'one\n');
  });

  it('accepting a follow-up prompt resets the idle clock, before its turn ends', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitFor(user, conv.id, idle);
    const longAgo = new Date(Date.now() - 30 * 60_000);
    await h.deps.db
      .updateTable('conversations')
      .set({ last_activity_at: longAgo })
      .where('id', '=', conv.id)
      .execute();
    const before = Date.now();
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'sleep 2' });
    assert.equal(res.status, 202);
    const row = await h.deps.db
      .selectFrom('conversations')
      .select(['last_activity_at', 'status'])
      .where('id', '=', conv.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'running');
    // Clocks of the database and this process may differ by a little: a second of slack.
    assert.ok(row.last_activity_at.getTime() >= before - 1000, `${row.last_activity_at.toISOString()}`);
    await h.waitForTurn(user, conv.id, 2);
  });

  it('running → idle with the turn failed when a spawn never starts (the sandbox vanished under the owner)', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    const warm = await h.waitFor(user, conv.id, idle);
    await h.destroyBackendSandbox(warm.sandbox?.name ?? '');
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo never' });
    assert.equal(res.status, 202);
    const turn = await h.waitForTurn(user, conv.id, 2);
    assert.equal(turn.status, 'failed');
    assert.match(turn.error ?? '', /could not be started/);
    const after = await h.get(user, conv.id);
    assert.equal(after.status, 'idle');
    assert.equal(after.sandbox?.status, 'terminated');
    // Resumable: the next prompt provisions a new sandbox.
    await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo back' });
    const third = await h.waitForTurn(user, conv.id, 3);
    assert.equal(third.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, third.id), 'back\n');
    assert.notEqual((await h.get(user, conv.id)).sandbox?.name, warm.sandbox?.name);
  });

  it('idle → idle when the sandbox is reclaimed for idle timeout: stage sandbox, sandbox terminated, resumable', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo first' });
    const warm = await h.waitFor(user, conv.id, idle);
    await idleFor61Minutes(conv.id);
    const reclaimed = await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
    assert.equal(reclaimed.status, 'idle');
    assert.match(reclaimed.sandbox?.reason ?? '', /idle for 60 minutes/);
    assert.ok(!(await h.backendSandboxes()).includes(warm.sandbox?.name ?? ''));
    const stages = (await h.events(conv.id)).filter((e) => e.stage === 'sandbox').map((e) => e.state);
    assert.deepEqual(stages, ['started', 'done']);
    // A follow-up prompt re-provisions.
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo again' });
    assert.equal(res.status, 202);
    const turn = await h.waitForTurn(user, conv.id, 2);
    assert.equal(turn.status, 'succeeded');
    const woke = await h.get(user, conv.id);
    assert.equal(woke.sandbox?.status, 'ready');
    assert.notEqual(woke.sandbox?.name, warm.sandbox?.name);
  });

  it('idle → idle when the sandbox reaches its max lifetime', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitFor(user, conv.id, idle);
    await h.deps.db
      .updateTable('sandboxes')
      .set({ created_at: new Date(Date.now() - 25 * 3_600_000) })
      .where('conversation_id', '=', conv.id)
      .execute();
    const reclaimed = await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
    assert.equal(reclaimed.status, 'idle');
    assert.match(reclaimed.sandbox?.reason ?? '', /maximum lifetime of 24 hours/);
  });

  it('any non-terminal → terminated: terminate destroys the sandbox; later prompts get 410', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    const warm = await h.waitFor(user, conv.id, idle);
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/terminate`);
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'terminated');
    const ended = await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
    assert.equal(ended.status, 'terminated');
    assert.ok(!(await h.backendSandboxes()).includes(warm.sandbox?.name ?? ''));
    const prompt = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'true' });
    assert.equal(prompt.status, 410);
    assert.equal(prompt.body.error, 'conversation_terminated');
    assert.equal((await h.api(user, 'POST', `/api/conversations/${conv.id}/terminate`)).status, 410);
    const stages = (await h.events(conv.id)).filter((e) => e.stage === 'terminate').map((e) => e.state);
    assert.deepEqual(stages, ['started', 'done']);
  });

  it('terminate during a running turn interrupts it and destroys the sandbox', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo go; sleep 30' });
    await h.waitFor(user, conv.id, (c) => c.status === 'running');
    await waitForOutput(conv.id, 'go\n');
    assert.equal((await h.api(user, 'POST', `/api/conversations/${conv.id}/terminate`)).status, 200);
    await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
    const [turn] = await h.turns(user, conv.id);
    assert.equal(turn?.status, 'interrupted');
  });

  it('interrupt stops the running turn (stage turn interrupted) and the conversation goes idle', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo go; sleep 30; echo never' });
    await h.waitFor(user, conv.id, (c) => c.status === 'running');
    await waitForOutput(conv.id, 'go\n');
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/interrupt`);
    assert.equal(res.status, 202);
    const turn = await h.waitForTurn(user, conv.id, 1, 15_000);
    assert.equal(turn.status, 'interrupted');
    assert.equal(await h.stdout(conv.id), 'go\n');
    const stage = (await h.events(conv.id)).filter((e) => e.stage === 'turn').map((e) => e.state);
    assert.deepEqual(stage, ['started', 'interrupted']);
    const idleAgain = await h.api(user, 'POST', `/api/conversations/${conv.id}/interrupt`);
    assert.equal(idleAgain.status, 409);
    assert.equal(idleAgain.body.error, 'no_turn_running');
  });

  it('answers 409 conversation_busy to a prompt while a turn runs', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'sleep 2' });
    await h.waitFor(user, conv.id, (c) => c.status === 'running');
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'true' });
    assert.equal(res.status, 409);
    assert.equal(res.body.error, 'conversation_busy');
    await h.waitFor(user, conv.id, idle);
  });

  it('takes exactly one of eight prompts sent at once to an idle conversation; the others are 409 conversation_busy', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo first' });
    await h.waitFor(user, conv.id, idle);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
          // Long enough that none of the others can come after its end.
          prompt: `sleep 2; echo parallel-${i}`,
        }),
      ),
    );
    const statuses = answers.map((r) => r.status).sort();
    assert.deepEqual(statuses, [202, 409, 409, 409, 409, 409, 409, 409]);
    for (const r of answers.filter((a) => a.status === 409)) assert.equal(r.body.error, 'conversation_busy');
    await h.waitFor(user, conv.id, idle);
    const turns = await h.turns(user, conv.id);
    assert.deepEqual(
      turns.map((t) => [t.seq, t.status]),
      [
        [1, 'succeeded'],
        [2, 'succeeded'],
      ],
    );
  });

  it('takes a follow-up in one statement only when the long way would take it too (queueWarmTurn)', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo first' });
    const done = await h.waitFor(user, conv.id, idle);
    const { db } = h.deps;
    const row = { tenantId: user.id, conversationId: conv.id, prompt: 'echo never', images: [] };
    const refusedWhile = async (what: string, set: () => Promise<unknown>, reset: () => Promise<unknown>) => {
      await set();
      assert.equal(await queueWarmTurn(db, row), undefined, what);
      await reset();
    };
    const user_ = (suspended_at: Date | null) =>
      db.updateTable('users').set({ suspended_at }).where('id', '=', user.id).execute();
    const conversation = (status: 'idle' | 'running') =>
      db.updateTable('conversations').set({ status }).where('id', '=', conv.id).execute();
    const sandbox = (status: 'ready' | 'starting') =>
      db
        .updateTable('sandboxes')
        .set({ status })
        .where('name', '=', done.sandbox?.name ?? '')
        .execute();
    await refusedWhile(
      'a suspended account',
      () => user_(new Date()),
      () => user_(null),
    );
    await refusedWhile(
      'a conversation not idle',
      () => conversation('running'),
      () => conversation('idle'),
    );
    await refusedWhile(
      'a sandbox not ready',
      () => sandbox('starting'),
      () => sandbox('ready'),
    );
    assert.equal(await queueWarmTurn(db, { ...row, tenantId: randomUUID() }), undefined, "another tenant's");
    assert.equal((await h.turns(user, conv.id)).length, 1, 'nothing was written');
    // Everything in place: the API's follow-up takes it, and it runs.
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo second' });
    assert.equal(res.status, 202);
    assert.equal(res.body.turn.seq, 2);
    assert.equal((await h.waitForTurn(user, conv.id, 2)).status, 'succeeded');
  });

  it('answers 503 conversation_provisioning to a prompt while a wake provisions a new sandbox (not busy)', async () => {
    const environment = await h.environment(user, { setup_script: 'sleep 3' });
    const slow = await h.agent(user, { environment_id: environment });
    const conv = await h.start(user, { agent_id: slow, prompt: 'echo first' });
    await h.waitFor(user, conv.id, idle, 60_000);
    await idleFor61Minutes(conv.id);
    await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
    const woke = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo again' });
    assert.equal(woke.status, 202);
    // The wake runs the setup script (3 s): the conversation is running, its turn queued.
    const refused = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'true' });
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error, 'conversation_provisioning');
    assert.equal(refused.headers.get('retry-after'), '5');
    // Interrupt and terminate too (spec, Errors: 503 for all three while blocked in provisioning).
    for (const path of ['interrupt', 'terminate']) {
      const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/${path}`);
      assert.equal(res.status, 503, path);
      assert.equal(res.body.error, 'conversation_provisioning');
    }
    const turn = await h.waitForTurn(user, conv.id, 2, 60_000);
    assert.equal(turn.status, 'succeeded');
    assert.equal((await h.turns(user, conv.id)).length, 2, 'the refused prompt queued nothing');
  });

  it('answers 503 conversation_provisioning with Retry-After while pending; DELETE still executes', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    for (const path of ['prompts', 'interrupt', 'terminate']) {
      const res = await h.api(
        user,
        'POST',
        `/api/conversations/${conv.id}/${path}`,
        path === 'prompts' ? { prompt: 'x' } : undefined,
      );
      assert.equal(res.status, 503, path);
      assert.equal(res.body.error, 'conversation_provisioning');
      assert.equal(res.headers.get('retry-after'), '5');
    }
    const del = await h.api(user, 'DELETE', `/api/conversations/${conv.id}`);
    assert.equal(del.status, 204);
    assert.equal((await h.api(user, 'GET', `/api/conversations/${conv.id}`)).status, 404);
    await waitUntil(async () => !(await h.backendSandboxes()).includes(conv.sandbox?.name ?? ''));
    assert.equal((await h.events(conv.id)).length, 0);
    // The provisioning the delete stopped is not a failure of the server: no error is logged for it.
    await sleep(500);
    const errors = h.logs.filter(
      (line) =>
        (line.includes(conv.id) && /"level":"error"/.test(line)) || line.includes('log writer is closed'),
    );
    assert.deepEqual(errors, []);
  });

  it('DELETE removes an idle conversation, its turns, its logs and its sandbox', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo bye' });
    const warm = await h.waitFor(user, conv.id, idle);
    assert.equal((await h.api(user, 'DELETE', `/api/conversations/${conv.id}`)).status, 204);
    assert.equal((await h.api(user, 'GET', `/api/conversations/${conv.id}/turns`)).status, 404);
    assert.equal((await h.events(conv.id)).length, 0);
    await waitUntil(async () => !(await h.backendSandboxes()).includes(warm.sandbox?.name ?? ''));
  });
});

describe('the provision deadline', () => {
  it('pending → failed when the 30-minute provision deadline passes: rows failed first, then the stuck work stopped', async () => {
    const environment = await h.environment(user, { setup_script: 'sleep 120' });
    const slow = await h.agent(user, { environment_id: environment });
    const conv = await h.start(user, { agent_id: slow, prompt: 'echo never' });
    await waitUntil(
      async () => (await h.events(conv.id)).some((e) => e.stage === 'setup' && e.state === 'started'),
      60_000,
    );
    await h.deps.db
      .updateTable('sandboxes')
      .set({ created_at: new Date(Date.now() - 31 * 60_000) })
      .where('conversation_id', '=', conv.id)
      .execute();
    const failed = await h.waitFor(user, conv.id, (c) => c.status === 'failed');
    assert.equal(failed.sandbox?.status, 'failed');
    assert.match(failed.failure_reason ?? '', /within 30 minutes/);
    const [turn] = await h.turns(user, conv.id);
    assert.equal(turn?.status, 'failed');
    await waitUntil(async () => !(await h.backendSandboxes()).includes(conv.sandbox?.name ?? ''));
    assert.equal(await h.stdout(conv.id), '');
  });
});

describe('when the sandbox backend goes down', () => {
  it("running → idle with the turn failed when the turn's backend socket drops", async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo up; sleep 30' });
    await waitForOutput(conv.id, 'up\n');
    await h.stopSandboxd();
    try {
      const turn = await h.waitForTurn(user, conv.id, 1);
      assert.equal(turn.status, 'failed');
      assert.match(turn.error ?? '', /backend|connection/);
      assert.equal((await h.get(user, conv.id)).status, 'idle');
    } finally {
      await h.restartSandboxd();
    }
  });

  it('a failed wake marks the sandbox failed and leaves the conversation resumable', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitFor(user, conv.id, idle);
    await idleFor61Minutes(conv.id);
    await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
    await h.stopSandboxd();
    try {
      const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo woke' });
      assert.equal(res.status, 202);
      const failed = await h.waitForTurn(user, conv.id, 2, 30_000);
      assert.equal(failed.status, 'failed');
      const after = await h.get(user, conv.id);
      assert.equal(after.status, 'idle');
      assert.equal(after.sandbox?.status, 'failed');
    } finally {
      await h.restartSandboxd();
    }
    await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo woke' });
    const turn = await h.waitForTurn(user, conv.id, 3);
    assert.equal(turn.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, turn.id), 'woke\n');
  });

  it('pending → failed when provisioning fails on the first wake: sandbox row failed, reason shown', async () => {
    await h.stopSandboxd();
    try {
      const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
      const failed = await h.waitFor(user, conv.id, (c) => c.status === 'failed', 30_000);
      assert.equal(failed.sandbox?.status, 'failed');
      assert.ok(failed.failure_reason);
      const prompt = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'true' });
      assert.equal(prompt.status, 409);
      assert.equal(prompt.body.error, 'conversation_failed');
    } finally {
      await h.restartSandboxd();
    }
  });
});

async function waitForOutput(id: string, text: string): Promise<void> {
  await waitUntil(async () => (await h.stdout(id)).includes(text));
}
