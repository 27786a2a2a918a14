// An interrupt that lands while a turn is ending (its process has exited, its end not yet
// committed) is for that turn: it never carries over to the next prompt's turn. Through the
// public API, against the real sandboxd with the scripted runtime (the prompt is the script).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
let user: TestUser;
before(async () => {
  h = await startConversationHarness();
  user = await h.user();
});
after(async () => {
  await h.close();
});

const ROUNDS = 12;

describe('an interrupt at the end of a turn', () => {
  it('is spent on that turn: the next prompt runs to the end', { timeout: 300_000 }, async () => {
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo warm' });
    await h.waitForTurn(user, conv.id, 1, 60_000);
    let seq = 1;
    let accepted = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // A short turn, and interrupts sent back to back until the API says nothing runs: the
      // last accepted ones arrive after the process exited, while the turn's end commits.
      seq++;
      const ending = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
        prompt: 'echo short',
      });
      assert.equal(ending.status, 202, JSON.stringify(ending.body));
      for (;;) {
        const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/interrupt`);
        if (res.status !== 202) break;
        accepted++;
      }
      await h.waitForTurn(user, conv.id, seq, 30_000);

      seq++;
      const next = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
        prompt: `echo next-${round}`,
      });
      assert.equal(next.status, 202, JSON.stringify(next.body));
      const turn = await h.waitForTurn(user, conv.id, seq, 30_000);
      assert.equal(turn.status, 'succeeded', `round ${round}: the next turn ended ${JSON.stringify(turn)}`);
      assert.ok((await h.stdout(conv.id)).includes(`next-${round}`), `round ${round}: its output`);
    }
    assert.ok(accepted > 0, 'some interrupts were taken');
  });
});
