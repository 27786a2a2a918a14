// The lifecycle clock's reasons name the operator's limits in words, in the singular for one
// (SANDBOX_MAX_LIFETIME_HOURS=1, SANDBOX_IDLE_TIMEOUT_MINUTES=1): "1 hour", never "1 hours".
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
let user: TestUser;
let agent: string;
before(async () => {
  h = await startConversationHarness({
    engine: { lifecycle: { tickMs: 100, maxLifetimeHours: 1, idleTimeoutMinutes: 1 } },
  });
  user = await h.user();
  agent = await h.agent(user);
});
after(async () => {
  await h.close();
});

const idle = (c: { status: string }) => c.status === 'idle';
const reclaimed = (c: { sandbox?: { status: string } | null }) => c.sandbox?.status === 'terminated';

describe('lifecycle reasons for limits of one', () => {
  it('says "1 hour" for a maximum lifetime of one hour', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitFor(user, conv.id, idle);
    await h.deps.db
      .updateTable('sandboxes')
      .set({ created_at: new Date(Date.now() - 2 * 3_600_000) })
      .where('conversation_id', '=', conv.id)
      .execute();
    const done = await h.waitFor(user, conv.id, reclaimed);
    assert.equal(done.sandbox?.reason, 'the sandbox reached its maximum lifetime of 1 hour');
  });

  it('says "1 minute" for an idle timeout of one minute', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitFor(user, conv.id, idle);
    await h.deps.db
      .updateTable('conversations')
      .set({ last_activity_at: new Date(Date.now() - 2 * 60_000) })
      .where('id', '=', conv.id)
      .execute();
    const done = await h.waitFor(user, conv.id, reclaimed);
    assert.equal(done.sandbox?.reason, 'the sandbox was idle for 1 minute');
  });
});
