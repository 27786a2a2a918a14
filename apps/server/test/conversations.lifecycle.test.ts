// Issue 9, deliverable 7: one test per row of the spec's transition table (States and
// transitions), through the public API only, against the real sandboxd with the scripted
// runtime (the prompt is the turn's shell script).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
let user: TestUser;
let agent: string;
before(async () => {
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: 100 } } });
  user = await h.user();
  agent = await h.agent(user);
});
after(async () => {
  await h.close();
});

const idle = (c: { status: string }) => c.status === 'idle';

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
});
