// A sandbox whose destroy the backend did not confirm is destroyed once the backend is back
// (conversations/provisioning/destroy-queue.ts): through the public API, on a real sandboxd that is stopped
// (its sandboxes keep running, as they do across a sandboxd restart) and started again.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { deleteConversation } from '../src/conversations/api/conversations.repo.ts';
import { type ConversationHarness, startConversationHarness, waitUntil } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
let user: TestUser;
let agent: string;

before(async () => {
  h = await startConversationHarness();
});
after(async () => {
  await h?.close();
});
beforeEach(async () => {
  user = await h.user();
  agent = await h.agent(user);
});

interface Queued {
  name: string;
  attempts: number;
  last_error: string | null;
  due_in_s: number;
}

async function queued(name: string): Promise<Queued | undefined> {
  const { rows } = await sql<Queued>`
    SELECT name, attempts, last_error, extract(epoch FROM next_at - now())::float8 AS due_in_s
      FROM sandbox_destroys WHERE name = ${name}`.execute(h.deps.db);
  return rows[0];
}

/** A conversation whose first turn ended, with its warm sandbox's name. */
async function idleConversation(): Promise<{ id: string; name: string }> {
  const conv = await h.start(user, { agent_id: agent, prompt: 'echo hi' });
  const idle = await h.waitFor(user, conv.id, (c) => c.status === 'idle' && c.sandbox?.status === 'ready');
  const name = idle.sandbox?.name;
  assert.ok(name);
  assert.ok((await h.backendSandboxes()).includes(name));
  return { id: conv.id, name };
}

describe('a sandbox destroy the backend did not confirm', () => {
  it('DELETE while the backend is down: queued, retried with backoff, destroyed once it is back', async () => {
    const { id, name } = await idleConversation();
    await h.stopSandboxd();
    try {
      const res = await h.api(user, 'DELETE', `/api/conversations/${id}`);
      assert.equal(res.status, 204);
      assert.equal((await h.api(user, 'GET', `/api/conversations/${id}`)).status, 404);
      await waitUntil(async () => (await queued(name)) !== undefined);
      const first = await queued(name);
      assert.equal(first?.attempts, 0);
      assert.ok(first?.last_error, 'the failure is kept with the row');
      assert.ok(first.due_in_s <= 60, `due within a minute (${first.due_in_s} s)`);

      // Due, and a tick while the backend is still down: one more attempt, then a minute's wait.
      await sql`UPDATE sandbox_destroys SET next_at = now() WHERE name = ${name}`.execute(h.deps.db);
      await h.deps.conversationEngine.tick();
      const retried = await queued(name);
      assert.equal(retried?.attempts, 1);
      assert.ok(retried.due_in_s > 50, `next try in ${retried.due_in_s} s`);
      await h.deps.conversationEngine.tick();
      assert.equal((await queued(name))?.attempts, 1, 'not retried before it is due');
    } finally {
      await h.restartSandboxd();
    }
    // The sandbox outlived the failed destroy (a stopped sandboxd leaves its sandboxes running).
    assert.ok((await h.backendSandboxes()).includes(name));
    await sql`UPDATE sandbox_destroys SET next_at = now() WHERE name = ${name}`.execute(h.deps.db);
    await h.deps.conversationEngine.tick();
    assert.equal(await queued(name), undefined, 'the row goes once the backend confirmed');
    assert.ok(!(await h.backendSandboxes()).includes(name), 'the sandbox is gone');
  });

  it('terminate while the backend is down: the sandbox goes at the first tick after it is back', async () => {
    const { id, name } = await idleConversation();
    await h.stopSandboxd();
    try {
      const res = await h.api(user, 'POST', `/api/conversations/${id}/terminate`);
      assert.equal(res.status, 200);
      await waitUntil(async () => (await queued(name)) !== undefined);
      const conv = await h.waitFor(user, id, (c) => c.sandbox?.status === 'terminated');
      assert.equal(conv.status, 'terminated');
    } finally {
      await h.restartSandboxd();
    }
    await h.deps.conversationEngine.tick();
    assert.equal(await queued(name), undefined);
    assert.ok(!(await h.backendSandboxes()).includes(name));
  });

  it('a delete queues the destroy in its own statement: a process that dies before destroying leaves it owed', async () => {
    const { id, name } = await idleConversation();
    // The request's first step alone (conversations.service.ts remove), as if the process died
    // right after it: the conversation and its rows are gone, the destroy is owed.
    assert.deepEqual(await deleteConversation(h.deps.db, user.id, id), [name]);
    assert.equal((await h.api(user, 'GET', `/api/conversations/${id}`)).status, 404);
    const owed = await queued(name);
    assert.equal(owed?.attempts, 0);
    assert.ok(owed.due_in_s > 50, 'due after the request had its own try');
    await sql`UPDATE sandbox_destroys SET next_at = now() WHERE name = ${name}`.execute(h.deps.db);
    await h.deps.conversationEngine.tick();
    assert.equal(await queued(name), undefined);
    assert.ok(!(await h.backendSandboxes()).includes(name));
    assert.equal(await deleteConversation(h.deps.db, user.id, id), null, 'a missing conversation: null');
  });

  it('a name retried many times is still retried, at most 64 minutes apart', async () => {
    // Not on the backend (a 404 confirms the destroy), after a thousand failed attempts.
    const gone = `paddock-${user.id.replaceAll('-', '').slice(0, 8)}-0dead000`;
    await sql`INSERT INTO sandbox_destroys (name, tenant_id, attempts) VALUES (${gone}, ${user.id}, 1000)`.execute(
      h.deps.db,
    );
    await h.deps.conversationEngine.tick();
    assert.equal(await queued(gone), undefined, 'retried and confirmed');
    // And one that keeps failing waits 64 minutes, not longer.
    const { id, name } = await idleConversation();
    await h.stopSandboxd();
    try {
      assert.equal((await h.api(user, 'DELETE', `/api/conversations/${id}`)).status, 204);
      await sql`UPDATE sandbox_destroys SET attempts = 1000, next_at = now() WHERE name = ${name}`.execute(
        h.deps.db,
      );
      await h.deps.conversationEngine.tick();
      const retried = await queued(name);
      assert.equal(retried?.attempts, 1001);
      assert.ok(Math.abs(retried.due_in_s - 64 * 60) < 30, `next try in ${retried.due_in_s} s`);
    } finally {
      await h.restartSandboxd();
    }
    await sql`UPDATE sandbox_destroys SET next_at = now() WHERE name = ${name}`.execute(h.deps.db);
    await h.deps.conversationEngine.tick();
    assert.equal(await queued(name), undefined);
    assert.ok(!(await h.backendSandboxes()).includes(name));
  });

  it('a destroy the backend confirms leaves nothing queued', async () => {
    const { id, name } = await idleConversation();
    const res = await h.api(user, 'DELETE', `/api/conversations/${id}`);
    assert.equal(res.status, 204);
    await waitUntil(async () => !(await h.backendSandboxes()).includes(name));
    assert.equal(await queued(name), undefined);
  });
});
