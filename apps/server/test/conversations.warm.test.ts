// The warm path through the public API (issue 9, deliverable 3): a conversation on an environment
// with a checkpoint restores it instead of running setup, and the env file, which a checkpoint
// never holds, is written again after the restore: the first turn finds it, mode 600, with the
// values of its own env, and keeps finding it; a variable the runtime sets for its own process
// does not change the file (it holds the environment's value).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RuntimeRegistry } from '../src/conversations/contracts.ts';
import { scriptedAdapter } from './fixtures/scripted-runtime.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

/** The scripted runtime, whose turns also get W_SHADOW from the runtime itself. */
const runtimes: RuntimeRegistry = (runtime) => ({
  ...scriptedAdapter,
  runtime,
  buildTurn(input) {
    const command = scriptedAdapter.buildTurn(input);
    return { ...command, env: { ...command.env, W_SHADOW: 'from-the-runtime' } };
  },
});

let h: ConversationHarness;
let user: TestUser;
before(async () => {
  h = await startConversationHarness({ engine: { runtimes } });
  user = await h.user();
});
after(async () => {
  await h.close();
});

const idle = (c: { status: string }) => c.status === 'idle';

/** An agent on a new environment whose checkpoint is built. */
async function warmAgent(secrets: Record<string, string>, env_vars: Record<string, string>): Promise<string> {
  const environment = await h.environment(user, {
    setup_script: 'echo built-by-setup > /home/sandbox/from-setup',
    env_vars,
  });
  for (const [key, value] of Object.entries(secrets)) {
    const put = await h.api(user, 'POST', `/api/environments/${environment}/secrets`, { key, value });
    assert.ok(put.status < 300, JSON.stringify(put.body));
  }
  const built = await h.api(user, 'POST', `/api/environments/${environment}/checkpoint`, {});
  assert.equal(built.status, 201, JSON.stringify(built.body));
  return await h.agent(user, { environment_id: environment });
}

// The first turn: the file from setup, the env file's mode, and whether sourcing the env file
// gives every variable the turn's env has (W_SHADOW aside: the file has the provisioned value).
const CHECK = [
  'cat /home/sandbox/from-setup',
  'stat -c %a /home/sandbox/.paddock/env',
  'secret=$W_SECRET; plain=$W_PLAIN; unset W_SECRET W_PLAIN W_SHADOW',
  '. /home/sandbox/.paddock/env',
  '[ "$secret" = "$W_SECRET" ] && [ "$plain" = "$W_PLAIN" ] && echo env-file-matches',
  'echo "shadow in the file: ${W_SHADOW:-none}"',
].join('\n');

describe('the warm path', () => {
  it('restores the checkpoint instead of setup; the first turn finds the env file, mode 600, with its env', async () => {
    const agent = await warmAgent({ W_SECRET: "warm-secret-'value'-1234" }, { W_PLAIN: 'plain $value' });
    const conv = await h.start(user, { agent_id: agent, prompt: CHECK });
    await h.waitFor(user, conv.id, idle);
    assert.equal(
      await h.stdout(conv.id),
      'built-by-setup\n600\nenv-file-matches\nshadow in the file: none\n',
    );
    const stages = (await h.events(conv.id))
      .filter((e) => e.stream === 'stage')
      .map((e) => `${e.stage}:${e.state}`);
    assert.deepEqual(stages, [
      'provision:started',
      'provision:done',
      'checkpoint_restore:started',
      'checkpoint_restore:done',
      'turn:started',
      'turn:done',
    ]);
    // A follow-up finds it too.
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, {
      prompt:
        'stat -c %a /home/sandbox/.paddock/env; unset W_SECRET; . /home/sandbox/.paddock/env && [ -n "$W_SECRET" ] && echo still-there',
    });
    assert.equal(res.status, 202);
    const turn = await h.waitForTurn(user, conv.id, 2);
    assert.equal(turn.status, 'succeeded');
    assert.equal(await h.stdout(conv.id, turn.id), '600\nstill-there\n');
    assert.ok(!(await h.stdout(conv.id)).includes('warm-secret'));
  });

  it("keeps the environment's value in the env file when the runtime sets that variable for its process", async () => {
    const agent = await warmAgent(
      { W_SECRET: 'warm-secret-5678' },
      { W_PLAIN: 'plain', W_SHADOW: 'from-the-environment' },
    );
    const conv = await h.start(user, { agent_id: agent, prompt: CHECK });
    await h.waitFor(user, conv.id, idle);
    assert.equal(
      await h.stdout(conv.id),
      'built-by-setup\n600\nenv-file-matches\nshadow in the file: from-the-environment\n',
    );
  });
});
