// Issue 37, finding 3: a failed turn says why in words (turn.ts invariant 7), in its error and in
// its stage, not only "the runtime exited with code 2". Through the public API, against the real
// sandboxd with the scripted runtime (the prompt is the turn's shell script; a line
// `PADDOCK_ERROR=<text>` is an error event, as a CLI's own failure message is).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { REDACTION_MARKER } from '../src/conversations/log/redactor.ts';
import { noCredentialMessage } from '../src/conversations/turns/runtimes/common.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

const SECRET = 'sk-ant-reason-5c1e9a7b3d';

let h: ConversationHarness;
let user: TestUser;
let agent: string;
before(async () => {
  h = await startConversationHarness();
  user = await h.user();
  agent = await h.agent(user);
});
after(async () => {
  await h.close();
});

/** Runs one turn to its end; its row (from the API and as stored) and the message of its stage's end. */
async function failedTurn(prompt: string, body: Record<string, unknown> = {}) {
  const conv = await h.start(user, { agent_id: agent, prompt, ...body });
  const turn = await h.waitForTurn(user, conv.id, 1, 60_000);
  const stage = (await h.events(conv.id)).find((e) => e.stage === 'turn' && e.state === 'failed');
  const stored = await h.deps.db
    .selectFrom('turns')
    .select('error')
    .where('id', '=', turn.id)
    .executeTakeFirstOrThrow();
  await h.api(user, 'DELETE', `/api/conversations/${conv.id}`);
  return { turn, stored: stored.error, stageMessage: stage?.message ?? null };
}

describe("a failed turn's reason", () => {
  it("the wrapper's sentence on stderr is the failed turn's reason, before the exit code", async () => {
    // What the adapters' credential check prints (common.ts stdinArgv) before exit 2.
    const sentence = noCredentialMessage('Anthropic', 'anthropic', 'ANTHROPIC_API_KEY');
    const quoted = sentence.replaceAll("'", "'\\''");
    const { turn, stageMessage } = await failedTurn(
      `echo 'some other output' >&2; printf '%s\\n' '${quoted}' >&2; exit 2`,
    );
    const want = `${sentence.slice('paddock: '.length)} (the runtime exited with code 2)`;
    assert.equal(turn.status, 'failed');
    assert.equal(turn.exit_code, 2);
    assert.equal(turn.error, want);
    assert.equal(stageMessage, want);
  });

  it('the CLI’s last error event is the reason when the wrapper said nothing', async () => {
    const { turn, stageMessage } = await failedTurn(
      'echo PADDOCK_ERROR=the model API request failed; echo "PADDOCK_ERROR=Invalid API key · Fix external API key"; exit 1',
    );
    const want = 'Invalid API key · Fix external API key (the runtime exited with code 1)';
    assert.equal(turn.error, want);
    assert.equal(stageMessage, want);
  });

  it('is stored redacted: a secret the CLI echoes in its reason never reaches the turn row', async () => {
    const vault = await h.vault(user);
    const put = await h.api(user, 'POST', `/api/vaults/${vault}/secrets`, { key: 'KEY', value: SECRET });
    assert.equal(put.status, 201);
    const withVault = await h.agent(user, { vault_ids: [vault] });
    const { turn, stored, stageMessage } = await failedTurn(
      'echo "PADDOCK_ERROR=the key $KEY was refused"; exit 1',
      {
        agent_id: withVault,
        vault_id: vault,
      },
    );
    assert.equal(turn.error, `the key ${REDACTION_MARKER} was refused (the runtime exited with code 1)`);
    assert.ok(!stageMessage?.includes(SECRET));
    assert.ok(!stored?.includes(SECRET), stored ?? '');
  });

  it('a turn that fails without a word keeps the exit code alone', async () => {
    const { turn } = await failedTurn('echo oops; exit 3');
    assert.equal(turn.error, 'the runtime exited with code 3');
  });
});
