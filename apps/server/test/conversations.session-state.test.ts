// Issue 9, deliverable 4: the runtime's session state is saved after a turn and restored into a
// re-provisioned sandbox, and a follow-up prompt never waits for that save (conversation-server.ts
// invariants 5 and 6). Through the public API against the real sandboxd, with the scripted runtime
// (whose session paths are ~/.scripted).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSandboxClient, type SandboxClient } from '@paddock/sandbox-client';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
let user: TestUser;
let agent: string;
let sandbox: SandboxClient;
before(async () => {
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: 100 } } });
  user = await h.user();
  agent = await h.agent(user);
  sandbox = createSandboxClient({ baseUrl: h.sandboxd.url, token: h.sandboxd.token });
});
after(async () => {
  await h.close();
});

/** Whether a `tar` (the session save's archiver) runs in the sandbox now. */
async function tarRuns(sandboxName: string): Promise<boolean> {
  const r = await sandbox.exec(sandboxName, {
    cmd: [
      'sh',
      '-c',
      'for f in /proc/[0-9]*/comm; do [ "$(cat "$f" 2>/dev/null)" = tar ] && exit 0; done; exit 1',
    ],
    timeoutMs: 10_000,
  });
  return r.exitCode === 0;
}

/** Polls tarRuns until it answers `wanted` (at most ~10 s); the last answer. */
async function tarUntil(sandboxName: string, wanted: boolean): Promise<boolean> {
  let runs = !wanted;
  for (let i = 0; i < 100 && runs !== wanted; i++) {
    runs = await tarRuns(sandboxName);
    if (runs !== wanted) await new Promise((r) => setTimeout(r, 100));
  }
  return runs;
}

describe('session state', () => {
  it('a follow-up cancels the save in progress and starts at once; the next save holds both turns, restored after a reclaim', async () => {
    // 200 GB of holes: reading them for the archive takes minutes (longer than the save's 120 s
    // limit), so a turn that waited for this save would not end within the 20 s below.
    const conv = await h.start(user, {
      agent_id: agent,
      prompt:
        'mkdir -p ~/.scripted && echo one > ~/.scripted/one && truncate -s 200G ~/.scripted/holes && echo first',
    });
    const first = await h.waitForTurn(user, conv.id, 1);
    assert.equal(first.status, 'succeeded');
    const name = (await h.get(user, conv.id)).sandbox?.name ?? '';
    assert.ok(await tarUntil(name, true), 'the save of the first turn runs');
    assert.equal(await h.sessionSavedAt(conv.id), null);

    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
      prompt: 'rm ~/.scripted/holes && echo two > ~/.scripted/two && echo second',
    });
    assert.equal(res.status, 202);
    const second = await h.waitForTurn(user, conv.id, 2, 20_000);
    assert.equal(second.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, second.id), 'second\n');

    // Saved once no turn waits: after the second turn, with both turns' files.
    await h.waitForSessionSaved(conv.id, new Date(0), 10_000);
    // The cancelled save's archiver was ended (its exec's socket dropped), not left reading 200 GB.
    assert.equal(await tarUntil(name, false), false, 'no archiver runs any more');

    // The sandbox is reclaimed (idle timeout); the next prompt provisions a new one with the state.
    await h.reclaim(user, conv.id);
    await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
      prompt: 'cat ~/.scripted/one ~/.scripted/two; ls ~/.scripted',
    });
    const third = await h.waitForTurn(user, conv.id, 3);
    assert.equal(third.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, third.id), 'one\ntwo\none\ntwo\n');
    assert.notEqual((await h.get(user, conv.id)).sandbox?.name, name);
  });

  it('a reclaim saves the state a lost save left behind (conversation-server.ts invariant 6)', async () => {
    const conv = await h.start(user, {
      agent_id: agent,
      prompt: 'mkdir -p ~/.scripted && echo kept > ~/.scripted/kept && echo first',
    });
    assert.equal((await h.waitForTurn(user, conv.id, 1)).status, 'succeeded');
    await h.waitForSessionSaved(conv.id, new Date(0), 10_000);
    // As if the save never happened (its owner died first): this owner's memory says "saved",
    // the rows say a turn ended after the last save.
    await h.deps.db
      .updateTable('conversations')
      .set({ session_state: null, session_state_at: null })
      .where('id', '=', conv.id)
      .execute();
    await h.reclaim(user, conv.id);
    await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'cat ~/.scripted/kept' });
    const second = await h.waitForTurn(user, conv.id, 2);
    assert.equal(second.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, second.id), 'kept\n');
  });
});
