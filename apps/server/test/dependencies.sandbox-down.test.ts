// The spec's dependency table, the sandbox backend's row (docs/operations.md, "When a dependency
// is down"): with the backend down, sign-in, dashboards, config management and past logs keep
// working, readiness stays 200 (the backend is excluded from it), and a new provision fails
// within bounded retries, marking the conversation failed with a reason. A real sandboxd,
// stopped under the running app; the app reached over HTTP only.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
let user: TestUser;
let agent: string;
let pastId: string;

before(async () => {
  h = await startConversationHarness();
  user = await h.user();
  agent = await h.agent(user);
  const conv = await h.start(user, { agent_id: agent, prompt: 'echo before the outage' });
  pastId = conv.id;
  const turn = await h.waitForTurn(user, conv.id, 1, 60_000);
  assert.equal(turn.status, 'succeeded', turn.error ?? '');
  await h.stopSandboxd();
});
after(async () => {
  await h?.close();
});

describe('the sandbox backend is down', () => {
  it('readiness stays 200: the backend is not part of it', async () => {
    const res = await fetch(`${h.url}/health/ready`);
    assert.equal(res.status, 200, await res.text());
  });

  it('registration, sign-in, dashboards and past logs keep working', async () => {
    const email = `down-${randomBytes(4).toString('hex')}@example.com`;
    const password = 'a long enough passphrase 42';
    const origin = { origin: h.config.publicUrl.origin, 'content-type': 'application/json' };
    const reg = await fetch(`${h.url}/api/auth/register`, {
      method: 'POST',
      headers: origin,
      body: JSON.stringify({ email, password }),
    });
    assert.equal(reg.status, 201, await reg.text());
    const login = await fetch(`${h.url}/api/auth/login`, {
      method: 'POST',
      headers: origin,
      body: JSON.stringify({ email, password }),
    });
    assert.equal(login.status, 200, await login.text());

    const list = await h.api(user, 'GET', '/api/conversations');
    assert.equal(list.status, 200);
    assert.ok(list.body.data.some((c: { id: string }) => c.id === pastId));
    const events = await h.api(user, 'GET', `/api/conversations/${pastId}/events`);
    assert.equal(events.status, 200);
    assert.ok(
      events.body.data.some((e: { stream: string; text?: string }) => e.text === 'before the outage\n'),
      JSON.stringify(events.body),
    );
  });

  it('config management keeps working: environments, secrets, agents', async () => {
    const env = await h.api(user, 'POST', '/api/environments', { name: `down-${Date.now()}` });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const secret = await h.api(user, 'POST', `/api/environments/${env.body.id}/secrets`, {
      key: 'TOKEN',
      value: 'during the outage',
    });
    assert.equal(secret.status, 201, JSON.stringify(secret.body));
    const created = await h.api(user, 'POST', '/api/agents', {
      name: `down-agent-${Date.now()}`,
      model: 'anthropic/claude-sonnet-4-5',
      runtime: 'claude',
      environment_id: env.body.id,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
  });

  it('a new provision fails after bounded retries and marks the conversation failed with a reason', async () => {
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    const failed = await h.waitFor(user, conv.id, (c) => c.status === 'failed', 120_000);
    assert.equal(failed.sandbox?.status, 'failed');
    assert.ok(failed.failure_reason, 'a reason is shown');
    // The service itself is fine.
    assert.equal((await fetch(`${h.url}/health/ready`)).status, 200);
  });
});
