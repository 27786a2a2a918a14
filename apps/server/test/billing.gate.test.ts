// Issue 42, the gate matrix: each subscription state × start / prompt / reattach / read, as a
// table through the public API, with the real gate (billing/gate.ts, BILLING_ENABLED=true), a
// real sandboxd and the scripted runtime. The states are written into billing_accounts as the
// webhooks and admin actions would. Reattach: a turn accepted while the account passed, its
// owner shut down mid-turn (the turn keeps running in its shim), the status changed, and the
// process that adopts the conversation re-joins it only if the gate passes.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ConversationHarness, startConversationHarness, waitUntil } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness({ env: { BILLING_ENABLED: 'true' } });
});
after(async () => {
  await h.close();
});

const DAY = 86400_000;
type Row = { status: string; trial_ends_at?: Date | null; legacy?: boolean } | null;

const MATRIX: { state: string; row: Row; passes: boolean }[] = [
  { state: 'active', row: { status: 'active' }, passes: true },
  { state: 'comped', row: { status: 'comped' }, passes: true },
  {
    state: 'trialing, trial ahead',
    row: { status: 'trialing', trial_ends_at: new Date(Date.now() + DAY) },
    passes: true,
  },
  { state: 'legacy (no row: predates billing)', row: null, passes: true },
  {
    state: 'legacy row, no trial end',
    row: { status: 'trialing', legacy: true, trial_ends_at: null },
    passes: true,
  },
  {
    state: 'trialing, trial over (local clock)',
    row: { status: 'trialing', trial_ends_at: new Date(Date.now() - 1000) },
    passes: false,
  },
  {
    state: 'trialing, no trial end, not legacy (fails closed)',
    row: { status: 'trialing', trial_ends_at: null },
    passes: false,
  },
  { state: 'past_due', row: { status: 'past_due' }, passes: false },
  { state: 'canceled', row: { status: 'canceled' }, passes: false },
];

async function setState(user: TestUser, row: Row) {
  await h.deps.db.deleteFrom('billing_accounts').where('user_id', '=', user.id).execute();
  if (row)
    await h.deps.db
      .insertInto('billing_accounts')
      .values({ user_id: user.id, ...row } as never)
      .execute();
}

const idle = (c: { status: string }) => c.status === 'idle';

function assertRefused(
  res: { status: number; body: { error?: string; upgrade_url?: string } },
  what: string,
) {
  assert.equal(res.status, 402, `${what}: ${JSON.stringify(res.body)}`);
  assert.equal(res.body.error, 'subscription_required');
  assert.equal(res.body.upgrade_url, new URL('/account/billing', h.config.publicUrl.origin).toString());
}

describe('the subscription gate matrix (status × start / prompt / reattach / read)', () => {
  for (const { state, row, passes } of MATRIX) {
    it(`${state}: ${passes ? 'starts, prompts and reattaches' : '402 on start, prompt and reattach'}; reads either way`, async () => {
      const user = await h.user();
      const agent = await h.agent(user);
      // Work accepted while the account passed (no row: legacy).
      const conv = await h.start(user, { agent_id: agent, prompt: 'echo one' });
      await h.waitFor(user, conv.id, idle);
      const b = await h.secondInstance();
      // Started on b, so b owns it: its shutdown hands the running turn to this process.
      const movingRes = await b.api(user, 'POST', '/api/conversations', { agent_id: agent, prompt: 'true' });
      assert.equal(movingRes.status, 201, JSON.stringify(movingRes.body));
      const moving = movingRes.body as { id: string };
      await h.waitFor(user, moving.id, idle);
      assert.equal(b.deps.ownership.holds(moving.id), true);

      await setState(user, row);

      // read
      const read = await h.api(user, 'GET', `/api/conversations/${conv.id}`);
      assert.equal(read.status, 200);
      assert.equal((await h.api(user, 'GET', `/api/conversations/${conv.id}/events`)).status, 200);
      assert.equal((await h.api(user, 'GET', '/api/conversations')).status, 200);

      // start
      const started = await h.api(user, 'POST', '/api/conversations', { agent_id: agent, prompt: 'true' });
      if (passes) assert.equal(started.status, 201, JSON.stringify(started.body));
      else assertRefused(started, 'start');

      // prompt (each turn)
      const prompted = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
        prompt: 'echo two',
      });
      if (passes) {
        assert.equal(prompted.status, 202, JSON.stringify(prompted.body));
        assert.equal((await h.waitForTurn(user, conv.id, 2)).status, 'succeeded');
      } else assertRefused(prompted, 'prompt');

      // reattach: a turn accepted on b while the account passed; b shuts down mid-turn; the
      // status is then `state`, and this process adopts the conversation.
      await setState(user, null);
      const turn = await b.api(user, 'POST', `/api/conversations/${moving.id}/prompts`, {
        prompt: 'echo go; sleep 4; echo after',
      });
      assert.equal(turn.status, 202, JSON.stringify(turn.body));
      await waitUntil(async () => (await h.stdout(moving.id)).includes('go\n'));
      await setState(user, row);
      await b.close();
      const ended = await h.waitForTurn(user, moving.id, 2, 60_000);
      const stages = (await h.events(moving.id)).filter((e) => e.stage === 'reattach');
      if (passes) {
        assert.equal(ended.status, 'succeeded');
        assert.ok(
          stages.some((s) => s.state === 'done'),
          'the adopter re-joined the sandbox',
        );
        assert.match(await h.stdout(moving.id), /go\nafter\n/);
      } else {
        assert.notEqual(ended.status, 'succeeded', 'the re-join was refused');
        assert.ok(
          stages.some((s) => s.state === 'failed' && /subscription/.test(s.message ?? '')),
          `the reattach stage failed on the gate: ${JSON.stringify(stages)}`,
        );
      }
    });
  }
});
