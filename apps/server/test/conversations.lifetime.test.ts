// The sandbox's "lifetime left" as the API shows it (the console's conversation view reads
// it): `expires_at` at SANDBOX_MAX_LIFETIME_HOURS from the sandbox's creation,
// `idle_expires_at` at SANDBOX_IDLE_TIMEOUT_MINUTES from the last activity while the
// conversation rests idle — the same bounds the lifecycle check applies — and neither once
// the sandbox is gone.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness({
    env: { SANDBOX_MAX_LIFETIME_HOURS: '3', SANDBOX_IDLE_TIMEOUT_MINUTES: '20' },
  });
});
after(async () => {
  await h?.close();
});

describe('sandbox lifetime in the conversation view', () => {
  it('gives the reclaim times of the live sandbox, and none after terminate', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const started = await h.start(user, { agent_id: agent, prompt: 'echo hello' });
    const idle = await h.waitFor(
      user,
      started.id,
      (c) => c.status === 'idle' && c.sandbox?.status === 'ready',
    );
    const sandbox = idle.sandbox!;
    assert.ok(sandbox.created_at);
    assert.equal(
      new Date(sandbox.expires_at!).getTime() - new Date(sandbox.created_at).getTime(),
      3 * 3_600_000,
    );
    assert.equal(
      new Date(sandbox.idle_expires_at!).getTime() - new Date(idle.last_activity_at).getTime(),
      20 * 60_000,
    );
    const listed = await h.api(user, 'GET', '/api/conversations');
    assert.equal(listed.body.data[0].sandbox.expires_at, sandbox.expires_at);

    const res = await h.api(user, 'POST', `/api/conversations/${started.id}/terminate`);
    assert.equal(res.status, 200);
    assert.equal(res.body.sandbox.expires_at, null);
    assert.equal(res.body.sandbox.idle_expires_at, null);
  });
});
