// Issue 9, deliverable 2: exactly one owner per live conversation across server processes
// sharing one database (advisory lock + lease epoch), commands reaching the owner whichever
// process receives them, and a process whose ownership connection drops stopping its
// conversation servers at once. Two app instances on one database stand for two processes.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { StaleOwnerError } from '../src/conversations/contracts.ts';
import { createOwnership } from '../src/conversations/engine/owner.ts';
import { ownerSetConversation, ownerStartTurn } from '../src/conversations/engine/owner-writes.repo.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: 200 } } });
});
after(async () => {
  await h.close();
});

const idle = (c: { status: string }) => c.status === 'idle';

describe('ownership (owner.ts, owner-writes.repo.ts)', () => {
  it('a second process cannot take a conversation its owner holds; after release it can, with a new epoch', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitFor(user, conv.id, idle);
    assert.equal(await h.deps.ownership.isOwned(conv.id), true, 'the warm conversation stays owned');
    const other = ownershipAs('other');
    try {
      assert.equal(await other.tryAcquire(user.id, conv.id), null);
      await h.api(user, 'POST', `/api/conversations/${conv.id}/terminate`);
      await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
      const lease = await waitForLease(() => other.tryAcquire(user.id, conv.id));
      const row = await h.deps.db
        .selectFrom('conversations')
        .select('owner_epoch')
        .where('id', '=', conv.id)
        .executeTakeFirstOrThrow();
      assert.equal(lease.epoch, String(row.owner_epoch));
      await other.release(conv.id);
    } finally {
      await other.close();
    }
  });

  it("a stale owner's writes are refused once another process took over", async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await terminatedConversation(user, agent);
    const a = ownershipAs('a');
    const b = ownershipAs('b');
    try {
      const leaseA = await waitForLease(() => a.tryAcquire(user.id, conv.id));
      await a.close(); // a pauses and loses its connection (and lock)
      const leaseB = await waitForLease(() => b.tryAcquire(user.id, conv.id));
      assert.ok(Number(leaseB.epoch) > Number(leaseA.epoch));
      await assert.rejects(ownerSetConversation(h.deps.db, leaseA, { status: 'idle' }), StaleOwnerError);
      assert.equal(await ownerSetConversation(h.deps.db, leaseB, { unread: false }), true);
    } finally {
      await b.close();
    }
  });
});

describe('starting a turn (ownerStartTurn)', () => {
  it('starts only a queued turn: one a request ended meanwhile stays as it is; a stale lease is refused', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await terminatedConversation(user, agent);
    const [turn] = await h.turns(user, conv.id);
    assert.equal(turn?.status, 'succeeded');
    const a = ownershipAs('a');
    const b = ownershipAs('b');
    try {
      const leaseA = await waitForLease(() => a.tryAcquire(user.id, conv.id));
      const sandbox = await h.deps.db
        .selectFrom('sandboxes')
        .select('id')
        .where('conversation_id', '=', conv.id)
        .executeTakeFirstOrThrow();
      // A terminate ends the open turns (`interrupted`) while the owner is about to start one.
      await h.deps.db.updateTable('turns').set({ status: 'interrupted' }).where('id', '=', turn.id).execute();
      assert.equal(await ownerStartTurn(h.deps.db, leaseA, turn.id, sandbox.id), false);
      assert.equal((await h.turns(user, conv.id))[0]?.status, 'interrupted', 'not set back to running');
      await a.close();
      await waitForLease(() => b.tryAcquire(user.id, conv.id));
      // Queued only while b holds the conversation: the orphan sweep (every 200 ms here) cannot
      // take it over and end the turn meanwhile.
      await h.deps.db.updateTable('turns').set({ status: 'queued' }).where('id', '=', turn.id).execute();
      await assert.rejects(ownerStartTurn(h.deps.db, leaseA, turn.id, sandbox.id), StaleOwnerError);
      assert.equal((await h.turns(user, conv.id))[0]?.status, 'queued');
      // As it was: no queued turn left for the orphan sweep to pick up.
      await h.deps.db.updateTable('turns').set({ status: 'succeeded' }).where('id', '=', turn.id).execute();
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('taking a lease (owner.ts invariant 6)', () => {
  const advisoryLocks = async (conversationId: string) =>
    (
      await h.database.handle.pool.query(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted
           AND objid = (hashtextextended('paddock:conversation:' || $1::text, 0) & 4294967295)::oid`,
        [conversationId],
      )
    ).rows[0].n as number;

  it('the lease carries the status and agent the bump read; a conversation that is gone leaves no lock', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await terminatedConversation(user, agent);
    const other = ownershipAs('other');
    try {
      const lease = await waitForLease(() => other.tryAcquire(user.id, conv.id));
      assert.equal(lease.status, 'terminated');
      assert.equal(lease.agentId, agent);
      assert.equal(await advisoryLocks(conv.id), 1);
      await other.release(conv.id);
      assert.equal(await advisoryLocks(conv.id), 0);
      // Another tenant's id behaves as a missing one: no lease, and the lock taken for it is let go.
      const stranger = await h.user();
      assert.equal(await other.tryAcquire(stranger.id, conv.id), null);
      assert.equal(await advisoryLocks(conv.id), 0);
      const missing = '01a00000-0000-7000-8000-000000000000';
      assert.equal(await other.tryAcquire(user.id, missing), null);
      assert.equal(await advisoryLocks(missing), 0);
    } finally {
      await other.close();
    }
  });
});

describe('the callback key when its owner shuts down (spec: Sandbox interface)', () => {
  it('a process that shuts down revokes the callback keys of the conversations it owned', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const b = await h.secondInstance();
    const res = await b.api(user, 'POST', '/api/conversations', { agent_id: agent, prompt: 'true' });
    assert.equal(res.status, 201);
    const id = (res.body as { id: string }).id;
    await h.waitFor(user, id, idle);
    assert.equal(b.deps.ownership.holds(id), true, 'the process that took the prompt owns it');
    const keys = () =>
      h.deps.db
        .selectFrom('api_keys')
        .select(['id', 'revoked_at'])
        .where('conversation_id', '=', id)
        .execute();
    const live = (await keys()).filter((k) => k.revoked_at === null);
    assert.equal(live.length, 1, 'the sandbox holds one live callback key');
    await b.close(); // a graceful shutdown: the sandbox (and a turn) would keep running
    const after = await keys();
    assert.ok(after.find((k) => k.id === live[0]?.id)?.revoked_at, 'the key is revoked');
  });
});

describe('commands across processes (commands.ts)', () => {
  it('a prompt received by a process that is not the owner runs on the owner', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo one > /home/sandbox/f' });
    await h.waitFor(user, conv.id, idle);
    assert.equal(h.deps.ownership.holds(conv.id), true);
    const b = await h.secondInstance();
    const res = await b.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
      prompt: 'cat /home/sandbox/f',
    });
    assert.equal(res.status, 202);
    const turn = await h.waitForTurn(user, conv.id, 2);
    assert.equal(turn.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, turn.id), 'one\n');
    assert.equal(h.deps.ownership.holds(conv.id), true);
    assert.equal(b.deps.ownership.holds(conv.id), false);
    // Interrupt and terminate too.
    await b.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'echo go; sleep 30' });
    await h.waitFor(user, conv.id, (c) => c.status === 'running');
    await until(async () => (await h.stdout(conv.id)).includes('go\n'));
    assert.equal((await b.api(user, 'POST', `/api/conversations/${conv.id}/interrupt`)).status, 202);
    assert.equal((await h.waitForTurn(user, conv.id, 3)).status, 'interrupted');
    assert.equal((await b.api(user, 'POST', `/api/conversations/${conv.id}/terminate`)).status, 200);
    await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
    await b.close();
  });

  it("losing the ownership connection stops the process's servers; another process adopts and the conversation goes on", async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo kept > /home/sandbox/f' });
    await h.waitFor(user, conv.id, idle);
    const b = await h.secondInstance();
    // Seen as it happens: right after it, any process (this one on a fresh connection, too) may
    // adopt the orphan again, so polling holds() for a false could miss the moment.
    const lost = new Promise<void>((resolve) => h.deps.ownership.onLost(resolve));
    // Cut the first instance's dedicated connection (the one holding the lock).
    await h.database.handle.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
         AND objid = (hashtextextended('paddock:conversation:' || $1::text, 0) & 4294967295)::oid`,
      [conv.id],
    );
    let noticed = false;
    void lost.then(() => {
      noticed = true;
    });
    await until(async () => noticed);
    // A process's sweep adopts the warm sandbox (or the prompt does): the turn runs.
    const res = await b.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
      prompt: 'cat /home/sandbox/f',
    });
    assert.equal(res.status, 202);
    const turn = await h.waitForTurn(user, conv.id, 2, 30_000);
    assert.equal(turn.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, turn.id), 'kept\n');
    await b.close();
  });
});

/** Another process's ownership connection (the same database). */
function ownershipAs(node: string) {
  return createOwnership({ pool: h.database.handle.pool, node, logger: h.deps.logger });
}

/** A conversation whose turn ran and which was then terminated: nobody owns it any more. */
async function terminatedConversation(user: TestUser, agent: string) {
  const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
  await h.waitFor(user, conv.id, idle);
  await h.api(user, 'POST', `/api/conversations/${conv.id}/terminate`);
  await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated');
  return conv;
}

async function until(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('condition not reached');
}

async function waitForLease<T>(take: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const lease = await take();
    if (lease) return lease;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no lease');
}
