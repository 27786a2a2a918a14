// The usage meter end to end (issue 38 item 7): a real sandboxd, the real Claude Code CLI against
// the fake inference provider, through the public API. A turn's tokens as the CLI reported them,
// its sandbox's life split into busy and parked once the sandbox is reclaimed, and a sandbox that
// fails before ready, each a usage event that GET /api/account/usage sums.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AgentsHarness, startAgentsHarness } from './helpers/agents-e2e.ts';
import type { TestUser } from './helpers/factories.ts';
import { PROVIDER_ENV } from './helpers/fake-inference.ts';

let a: AgentsHarness;
let user: TestUser;
before(async () => {
  a = await startAgentsHarness();
  user = await a.h.user();
});
after(async () => {
  await a?.close();
});

async function usageEvents(conversationId: string) {
  return await a.h.deps.db
    .selectFrom('usage_events')
    .selectAll()
    .where('conversation_id', '=', conversationId)
    .orderBy('id')
    .execute();
}

describe('usage metering end to end', () => {
  it('a Claude Code turn and its sandbox become usage events: tokens as reported, busy and parked time', async () => {
    const setup = await a.setup(user, { runtime: 'claude' });
    a.fake.script('claude', { marker: 'USAGE-1', reply: 'Counted.', usage: { input: 120, output: 30 } });
    const conv = await a.h.start(user, {
      agent_id: setup.agentId,
      vault_id: setup.vaultId,
      prompt: 'USAGE-1: say something',
    });
    const turn = await a.followTurn(user, conv.id);
    assert.equal(turn.end.state, 'done', String(turn.end.message));
    const [ran] = await a.h.turns(user, conv.id);
    assert.ok(ran?.started_at && ran.ended_at);

    // The turn's event is written as the turn ends, the sandbox's once it is reclaimed.
    const turnEvent = (await usageEvents(conv.id)).find((e) => e.kind === 'turn');
    assert.ok(turnEvent, 'a turn event as the turn ended');
    assert.equal(turnEvent.subject_id, ran.id);
    assert.equal(turnEvent.status, 'succeeded');
    assert.equal(turnEvent.runtime, 'claude');
    assert.equal(turnEvent.model, PROVIDER_ENV.claude.model);
    assert.deepEqual([turnEvent.input_tokens, turnEvent.output_tokens], [120, 30]);
    const turnSeconds = (Date.parse(ran.ended_at) - Date.parse(ran.started_at)) / 1000;
    assert.ok(
      Math.abs(turnEvent.busy_seconds - turnSeconds) < 0.01,
      `${turnEvent.busy_seconds} vs ${turnSeconds}`,
    );

    await a.reclaim(user, conv.id);
    const sandboxEvents = (await usageEvents(conv.id)).filter((e) => e.kind === 'sandbox');
    assert.equal(sandboxEvents.length, 1, 'one event for the sandbox’s lifetime');
    const [life] = sandboxEvents;
    assert.equal(life?.status, 'terminated');
    assert.ok(life?.ready_at, 'it was ready');
    assert.equal(turnEvent.sandbox_id, life.subject_id);
    assert.ok(Math.abs(life.busy_seconds - turnSeconds) < 0.01, 'busy: the turn’s run');
    const ready = (life.ended_at.getTime() - life.ready_at.getTime()) / 1000;
    assert.ok(life.parked_seconds > 0, 'parked: ready and idle after the turn');
    assert.ok(Math.abs(life.busy_seconds + life.parked_seconds - ready) < 0.01, 'busy + parked = ready life');

    const res = await a.h.api(user, 'GET', '/api/account/usage');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const body = res.body as {
      sandboxes: { count: number; busy_seconds: number; parked_seconds: number };
      turns: { count: number; input_tokens: number; output_tokens: number };
      by_model: { runtime: string; model: string; turns: number }[];
    };
    assert.equal(body.sandboxes.count, 1);
    assert.equal(body.turns.count, 1);
    assert.deepEqual([body.turns.input_tokens, body.turns.output_tokens], [120, 30]);
    assert.deepEqual(
      body.by_model.map((m) => [m.runtime, m.model, m.turns]),
      [['claude', PROVIDER_ENV.claude.model, 1]],
    );
  });

  it('a sandbox that fails before ready is a usage event, with no busy or parked time', async () => {
    const setup = await a.setup(user, { runtime: 'claude', environment: { setup_script: 'exit 3\n' } });
    const conv = await a.h.start(user, {
      agent_id: setup.agentId,
      vault_id: setup.vaultId,
      prompt: 'USAGE-2: never runs',
    });
    const failed = await a.h.waitFor(user, conv.id, (c) => c.status === 'failed', 120_000);
    assert.equal(failed.status, 'failed');
    const events = await usageEvents(conv.id);
    assert.deepEqual(
      events.map((e) => [e.kind, e.status, e.ready_at, e.busy_seconds, e.parked_seconds]),
      [['sandbox', 'failed', null, 0, 0]],
    );
    assert.ok(events[0]?.reason, 'the failure’s reason');
    const body = (await a.h.api(user, 'GET', '/api/account/usage')).body as {
      sandboxes: { count: number; failed_before_ready: number };
    };
    assert.deepEqual([body.sandboxes.count, body.sandboxes.failed_before_ready], [2, 1]);
  });
});
