// The account's inference credentials in a real conversation, public API only (issue 10,
// item 4): the scripted runtime's turn prints the variables a runtime reads; the log shows the
// key redacted, a vault secret of the same name wins, and another account's turn sees nothing.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness();
});
after(async () => {
  await h?.close();
});

const KEY = 'sk-ant-conversation-key-Wm4Tq8';
const VAULT_KEY = 'sk-ant-vault-wins-key-Jr5Np2';

describe('inference credentials in a conversation', () => {
  test("the turn runs with the owner's key (redacted in the log), a vault secret of the same name overrides it, another account gets none", async () => {
    const user = await h.user();
    const put = await h.api(user, 'PUT', '/api/account/inference-credentials/anthropic', {
      api_key: KEY,
      base_url: 'https://llm-gateway.example.com/anthropic',
    });
    assert.equal(put.status, 200);
    const agent = await h.agent(user);
    const conv = await h.start(user, {
      agent_id: agent,
      prompt: 'echo "key=$ANTHROPIC_API_KEY url=$ANTHROPIC_BASE_URL length=${#ANTHROPIC_API_KEY}"',
    });
    await h.waitFor(user, conv.id, (c) => c.status === 'idle');
    assert.equal(
      await h.stdout(conv.id),
      `key=[REDACTED] url=https://llm-gateway.example.com/anthropic length=${KEY.length}\n`,
    );

    // A vault secret of the same name wins (shown upper-cased: a form the redactor does not know).
    const vault = await h.vault(user);
    assert.equal(
      (
        await h.api(user, 'POST', `/api/vaults/${vault}/secrets`, {
          key: 'ANTHROPIC_API_KEY',
          value: VAULT_KEY,
        })
      ).status,
      201,
    );
    const vaultAgent = await h.agent(user, { vault_ids: [vault] });
    const overridden = await h.start(user, {
      agent_id: vaultAgent,
      vault_id: vault,
      prompt:
        'printf \'%s\' "$ANTHROPIC_API_KEY" | tr a-z A-Z; echo; echo "key=$ANTHROPIC_API_KEY base=${ANTHROPIC_BASE_URL:-none}"',
    });
    await h.waitFor(user, overridden.id, (c) => c.status === 'idle');
    assert.equal(await h.stdout(overridden.id), `${VAULT_KEY.toUpperCase()}\nkey=[REDACTED] base=none\n`);

    // Another account: nothing of the first one's.
    const other = await h.user();
    const otherAgent = await h.agent(other);
    const theirs = await h.start(other, {
      agent_id: otherAgent,
      prompt: 'echo "key=${ANTHROPIC_API_KEY:-unset} url=${ANTHROPIC_BASE_URL:-unset}"',
    });
    await h.waitFor(other, theirs.id, (c) => c.status === 'idle');
    assert.equal(await h.stdout(theirs.id), 'key=unset url=unset\n');

    // Nothing persisted or logged holds the key.
    for (const id of [conv.id, overridden.id]) {
      const rows = await h.events(id);
      assert.ok(!JSON.stringify(rows).includes(KEY));
      assert.ok(!JSON.stringify(rows).includes(VAULT_KEY));
    }
    assert.ok(!h.logs.join('').includes(KEY));
    for (const id of [conv.id, overridden.id, theirs.id])
      await h.api(id === theirs.id ? other : user, 'DELETE', `/api/conversations/${id}`);
  });

  test('a key set or deleted while the sandbox is warm reaches the next turn', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    // The key as the turn sees it, the env file's line for it, a digest of the callback key, and
    // the env file's mode (spec, Secrets model: owner-only, also when it is written again).
    const prompt =
      'echo "key=${ANTHROPIC_API_KEY:-unset} file=$(grep -c "^export ANTHROPIC_API_KEY=" ~/.paddock/env)' +
      ' callback=$(printf %s "$PADDOCK_TOKEN" | sha256sum | cut -c1-12) mode=$(stat -c %a ~/.paddock/env)"';
    const conv = await h.start(user, { agent_id: agent, prompt });
    const turn = async (seq: number) => {
      const ended = await h.waitForTurn(user, conv.id, seq);
      assert.equal(ended.status, 'succeeded');
      const line = (await h.stdout(conv.id)).split('\n')[seq - 1] ?? '';
      const match = /^key=(\S+) file=(\d) callback=([0-9a-f]{12}) mode=(\d+)$/.exec(line);
      assert.ok(match, line);
      assert.equal(match[4], '600', `the env file's mode after turn ${seq}`);
      return { key: match[1], file: match[2], callback: match[3] };
    };
    const prompted = async () =>
      assert.equal(
        (await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt })).status,
        202,
      );

    const first = await turn(1);
    assert.deepEqual({ key: first.key, file: first.file }, { key: 'unset', file: '0' });
    const KEY2 = 'sk-ant-set-while-warm-Hx7Lq3';
    const put = await h.api(user, 'PUT', '/api/account/inference-credentials/anthropic', { api_key: KEY2 });
    assert.equal(put.status, 200);
    await prompted();
    const second = await turn(2);
    // The next turn has the key (redacted in the log) in its env and in the env file, and the same
    // callback key: the sandbox was not provisioned again, its env was.
    assert.deepEqual(second, { key: '[REDACTED]', file: '1', callback: first.callback });

    assert.equal((await h.api(user, 'DELETE', '/api/account/inference-credentials/anthropic')).status, 204);
    await prompted();
    assert.deepEqual(await turn(3), { key: 'unset', file: '0', callback: first.callback });

    const stages = (await h.events(conv.id)).filter((e) => e.stream === 'stage' && e.state === 'started');
    assert.equal(stages.filter((e) => e.stage === 'provision').length, 1);
    assert.ok(!JSON.stringify(await h.events(conv.id)).includes(KEY2));
    assert.ok(!h.logs.join('').includes(KEY2));
    await h.api(user, 'DELETE', `/api/conversations/${conv.id}`);
  });
});
