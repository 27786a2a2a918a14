// Issue 35, finding 10: an interrupt sent in the first milliseconds of a turn stops it with
// SIGTERM, however early it comes; it never waits for the SIGKILL 5 s later. Through the public
// API, against the real sandboxd with the scripted runtime (the prompt is the turn's script).
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

/** The turn's row, read straight from the table (a poll as tight as the database answers). */
async function turnRow(conversationId: string, seq: number) {
  return await h.deps.db
    .selectFrom('turns')
    .select(['id', 'status', 'exec_session_id'])
    .where('conversation_id', '=', conversationId)
    .where('seq', '=', seq)
    .executeTakeFirst();
}

const OFFSETS = ['at once (0 ms)', 'when the turn row is running', 'when the exec started'] as const;
const RUNS_PER_OFFSET = 8;

describe('interrupt at the start of a turn', () => {
  it('ends the turn interrupted by SIGTERM at every early offset, never by the SIGKILL', {
    timeout: 300_000,
  }, async () => {
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo warm' });
    await h.waitForTurn(user, conv.id, 1, 60_000);
    let seq = 1;
    const outcomes: string[] = [];
    for (let run = 0; run < RUNS_PER_OFFSET; run++) {
      for (const offset of OFFSETS) {
        seq++;
        const logsBefore = h.logs.length;
        const prompt = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
          prompt: 'echo go; sleep 60; echo never',
        });
        assert.equal(prompt.status, 202, JSON.stringify(prompt.body));
        if (offset === 'when the turn row is running')
          while ((await turnRow(conv.id, seq))?.status !== 'running');
        if (offset === 'when the exec started') while (!(await turnRow(conv.id, seq))?.exec_session_id);
        // A queued turn counts as running for the API: the interrupt is taken at every offset.
        const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/interrupt`);
        assert.equal(res.status, 202, JSON.stringify(res.body));
        const turn = await h.waitForTurn(user, conv.id, seq, 30_000);
        const row = await turnRow(conv.id, seq);
        const killed = h.logs
          .slice(logsBefore)
          .some((line) => line.includes('SIGKILL') && line.includes(conv.id));
        outcomes.push(`${offset}: ${turn.status} exit ${turn.exit_code}${killed ? ' (SIGKILL)' : ''}`);
        assert.equal(turn.status, 'interrupted', `${offset} (turn ${row?.id}): ${outcomes.join('; ')}`);
        assert.ok(!killed, `${offset} (turn ${row?.id}) ended by SIGKILL: ${outcomes.join('; ')}`);
        // 137 = 128 + SIGKILL (the backend's code for a process ended by a signal).
        assert.notEqual(turn.exit_code, 137, `${offset}: ${outcomes.join('; ')}`);
      }
    }
    assert.equal(await h.stdout(conv.id).then((out) => out.includes('never')), false);
  });
});
