// The agent end-to-end harness itself (helpers/agents-e2e.ts, helpers/fake-inference.ts): a
// manifest applied through the API provisions a sandbox that cloned the test repository from
// the fake git host, and the sandbox reaches the fake inference provider by its test host name
// through the egress proxy, speaking its real wire format.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSandboxClient } from '@paddock/sandbox-client';
import { type AgentsHarness, startAgentsHarness } from './helpers/agents-e2e.ts';
import type { TestUser } from './helpers/factories.ts';

let a: AgentsHarness;
let user: TestUser;
before(async () => {
  a = await startAgentsHarness();
  user = await a.h.user();
});
after(async () => {
  await a?.close();
});

describe('agents e2e harness', () => {
  it('provisions from a manifest: the repository cloned, the provider base URL and key in the sandbox env', async () => {
    const setup = await a.setup(user, { runtime: 'claude' });
    const conv = await a.h.start(user, {
      agent_id: setup.agentId,
      vault_id: setup.vaultId,
      prompt: 'HARNESS-1',
    });
    const turn = await a.followTurn(user, conv.id);
    assert.ok(turn.end.turn_id);
    assert.equal(await a.readFile(user, conv.id, 'app/notes.txt'), 'original\n');
    const env = await a.readFile(user, conv.id, '.paddock/env');
    assert.match(env, new RegExp(`ANTHROPIC_BASE_URL=.?${a.fake.sandboxUrl.replaceAll('.', '\\.')}`));
    assert.ok(env.includes(setup.key));
  });

  it('the sandbox reaches the fake provider by its host name through the egress proxy (Anthropic Messages, streamed)', async () => {
    a.fake.script('claude', {
      marker: 'HARNESS-2',
      reply: 'hello from the fake',
      usage: { input: 3, output: 4 },
    });
    const setup = await a.setup(user, { runtime: 'claude' });
    const conv = await a.h.start(user, {
      agent_id: setup.agentId,
      vault_id: setup.vaultId,
      prompt: 'HARNESS-2',
    });
    await a.followTurn(user, conv.id);
    const name = (await a.h.get(user, conv.id)).sandbox?.name ?? '';
    const sandbox = createSandboxClient({ baseUrl: a.h.sandboxd.url, token: a.h.sandboxd.token });
    const body = JSON.stringify({
      model: 'claude-sonnet-4-5',
      max_tokens: 100,
      stream: true,
      messages: [{ role: 'user', content: 'HARNESS-2 please' }],
    });
    const r = await sandbox.exec(name, {
      cmd: [
        'sh',
        '-c',
        'curl -sS -X POST -H "content-type: application/json" -H "x-api-key: k" --data "$1" "$2/v1/messages"',
        'probe',
        body,
        a.fake.sandboxUrl,
      ],
      timeoutMs: 20_000,
    });
    assert.equal(r.exitCode, 0, r.stderr.toString('utf8'));
    const out = r.stdout.toString('utf8');
    assert.match(out, /event: message_start/);
    assert.match(out, /hello from the fake/);
    const seen = a.fake.requests().find((q) => q.text.includes('HARNESS-2 please'));
    assert.ok(seen, 'the fake journaled the request');
    assert.equal(seen.status, 200);
  });
});
