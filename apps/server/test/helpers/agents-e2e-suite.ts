// One runtime end to end (issue 10 item 6), through the public API only: the same story for each
// of the four CLIs, told by agents.<runtime>.e2e.test.ts, once for each way docs/agents.md "Using a
// gateway" gives to reach a model gateway: a service route to a listener on this host's loopback,
// and a private address of the LAN (a test network's, opened with SANDBOXD_EGRESS_ALLOW_CIDRS and
// named by the hosts override; issue 37 finding 9).
//   1. a manifest: an environment cloning the test repository, an agent of the runtime, a vault
//      holding the provider key;
//   2. a conversation whose prompt makes the agent (the scripted fake provider) edit a file and
//      run a command with the CLI's own shell tool, then answer; followed on SSE to the turn's end;
//      the file changed in the sandbox, the common events recorded, the turn's session and usage;
//   3. a follow-up: the same session resumed (the provider sees the earlier messages);
//   4. the sandbox reclaimed for idleness, a prompt again: a new sandbox, still the same session;
//   5. without the provider key: the turn fails at once with a readable reason, never a hang;
//   6. a provider answering a bare `400 Bad Request` (no body, as a gateway's HTTP parser answers
//      a request it cannot read): the turn's error says the status (and the URL where Paddock
//      knows it), where Codex alone prints an empty message, opencode the status text and Gemini
//      an empty JSON error.
// 5 and 6 once, through the service route: how the provider is reached changes nothing there.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Runtime } from '../../src/agents/agents.tables.ts';
import { type AgentSetup, type AgentsHarness, type Gateway, startAgentsHarness } from './agents-e2e.ts';
import type { TestUser } from './factories.ts';
import { PROVIDER_ENV } from './fake-inference.ts';

export interface AgentE2EOptions {
  /** Extra provider settings for the environment (e.g. opencode's provider config). */
  envVars?: Record<string, string>;
  model?: string;
  /** Extra environment spec fields (e.g. packages installing the CLI where no runtime layer is). */
  environment?: Record<string, unknown>;
  /**
   * The runtime reports usage per model call (opencode's steps): the first turn's usage is the sum
   * of its usage events (the tool call's step and the answer's), the last of them the answer's.
   */
  usagePerStep?: boolean;
  /** The message the wrapper prints when the key is missing. */
  missingCredential: RegExp;
  /** The turn's error when the provider answers a bare 400 to `url` (the endpoint the CLI posts to). */
  bareError(url: string): string;
}

type Row = Record<string, unknown>;

export function describeAgentE2E(runtime: Runtime, options: AgentE2EOptions): void {
  describeStory(runtime, options, 'route');
  describeStory(runtime, options, 'lan');
}

const TITLES: Record<Gateway, string> = {
  route: 'end to end',
  lan: 'end to end, the gateway on a private LAN address',
};

function describeStory(runtime: Runtime, options: AgentE2EOptions, gateway: Gateway): void {
  let a: AgentsHarness;
  let user: TestUser;
  let setup: AgentSetup;
  const marker = (n: number) => `E2E-${runtime.toUpperCase()}-${n}`;

  describe(`${runtime} ${TITLES[gateway]}`, () => {
    before(async () => {
      a = await startAgentsHarness({ gateway });
      user = await a.h.user();
      setup = await a.setup(user, {
        runtime,
        ...(options.envVars ? { envVars: options.envVars } : {}),
        ...(options.model ? { model: options.model } : {}),
        ...(options.environment ? { environment: options.environment } : {}),
      });
    });
    after(async () => {
      await a?.close();
    });

    let conversationId = '';
    let lastEventId = '';
    let sessionId = '';

    it(`edits a file and runs a command with ${runtime}'s own shell tool; the file changed, the turn's session, usage and events recorded`, async () => {
      a.fake.script(runtime, {
        marker: marker(1),
        command: `printf 'edited by ${runtime}\\n' >> app/notes.txt && git -C app status --short`,
        reply: 'I appended a line to app/notes.txt.',
        usage: { input: 120, output: 30 },
      });
      const conv = await a.h.start(user, {
        agent_id: setup.agentId,
        vault_id: setup.vaultId,
        prompt: `${marker(1)}: append a line to app/notes.txt and show git status`,
      });
      conversationId = conv.id;
      const turn = await a.followTurn(user, conv.id);
      lastEventId = turn.end.id;
      const stderr = turn.messages
        .filter((m) => m.event === 'stderr')
        .map((m) => JSON.parse(m.data ?? '{}').text)
        .join('');
      assert.equal(
        turn.end.state,
        'done',
        `turn ended ${turn.end.state}: ${turn.end.message}; stderr: ${stderr}`,
      );
      assert.equal(await a.readFile(user, conv.id, 'app/notes.txt'), `original\nedited by ${runtime}\n`);
      const [first] = await a.h.turns(user, conv.id);
      assert.equal(first?.status, 'succeeded');
      assert.match(first?.runtime_session_id ?? '', /^\S{8,}$/);
      sessionId = first?.runtime_session_id ?? '';
      // The common events, in order: the tool call (its command), its result (git's output), the
      // answer, the usage and the session.
      const events = (await a.turnEvents(user, conv.id)).map((r) => r['event'] as Row);
      if (options.usagePerStep) {
        const usages = events.filter((e) => e['kind'] === 'usage').map((e) => e['usage'] as Row);
        const sum = (key: string) => usages.reduce((n, u) => n + Number(u[key] ?? 0), 0);
        assert.ok(usages.length >= 2, `one usage event per step: ${JSON.stringify(usages)}`);
        assert.deepEqual(
          [usages.at(-1)?.['input_tokens'], usages.at(-1)?.['output_tokens']],
          [120, 30],
          'the answer’s step',
        );
        assert.equal(first?.usage?.['input_tokens'], sum('input_tokens'));
        assert.equal(first?.usage?.['output_tokens'], sum('output_tokens'));
      } else {
        assert.equal(first?.usage?.['input_tokens'], 120);
        assert.equal(first?.usage?.['output_tokens'], 30);
      }
      const kinds = events.map((e) => e['kind']);
      for (const kind of ['session', 'tool_call', 'tool_result', 'text', 'usage'])
        assert.ok(kinds.includes(kind), `no ${kind} event in ${JSON.stringify(kinds)}`);
      const call = events.find((e) => e['kind'] === 'tool_call');
      assert.match(JSON.stringify(call?.['input']), /edited by/);
      const result = events.find((e) => e['kind'] === 'tool_result');
      assert.match(String(result?.['output']), /M notes\.txt/);
      const text = events
        .filter((e) => e['kind'] === 'text')
        .map((e) => e['text'])
        .join('');
      assert.equal(text, 'I appended a line to app/notes.txt.');
      assert.ok(events.some((e) => e['kind'] === 'session' && e['session_id'] === sessionId));
      // The key reached the provider, and no log row holds it.
      const rows = await a.h.events(conv.id);
      assert.ok(
        !rows.some((r) => (r.text ?? '').includes(setup.key) || (r.message ?? '').includes(setup.key)),
      );
    });

    it('a follow-up resumes the same session: the provider sees the earlier messages', async () => {
      a.fake.script(runtime, {
        marker: marker(2),
        reply: 'The line is there.',
        usage: { input: 200, output: 6 },
      });
      const res = await a.h.api(user, 'POST', `/api/conversations/${conversationId}/prompts`, {
        prompt: `${marker(2)}: is the line still there?`,
      });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const turn = await a.followTurn(user, conversationId, lastEventId);
      lastEventId = turn.end.id;
      assert.equal(turn.end.state, 'done', String(turn.end.message));
      const second = (await a.h.turns(user, conversationId)).find((t) => t.seq === 2);
      assert.equal(second?.runtime_session_id, sessionId);
      // This turn's usage, not the session's so far (codex reports per-thread totals).
      assert.deepEqual([second?.usage?.['input_tokens'], second?.usage?.['output_tokens']], [200, 6]);
      const request = a.fake.requests().findLast((r) => r.text.includes(marker(2)));
      assert.ok(request, 'the provider saw the follow-up');
      assert.ok(request.text.includes(marker(1)), 'the follow-up carried the first prompt');
      assert.ok(request.text.includes('I appended a line to app/notes.txt.'), 'and the first answer');
    });

    it('after the sandbox is reclaimed, a prompt re-provisions and the same session is still resumed', async () => {
      const second = (await a.h.turns(user, conversationId)).find((t) => t.seq === 2);
      await a.waitForSessionSaved(conversationId, new Date(second?.ended_at ?? 0));
      const before = (await a.h.get(user, conversationId)).sandbox?.name;
      await a.reclaim(user, conversationId);
      a.fake.script(runtime, { marker: marker(3), reply: 'Still here.', usage: { input: 260, output: 3 } });
      const res = await a.h.api(user, 'POST', `/api/conversations/${conversationId}/prompts`, {
        prompt: `${marker(3)}: do you remember?`,
      });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const turn = await a.followTurn(user, conversationId, lastEventId);
      assert.equal(turn.end.state, 'done', String(turn.end.message));
      const now = await a.h.get(user, conversationId);
      assert.notEqual(now.sandbox?.name, before, 'a new sandbox');
      const third = (await a.h.turns(user, conversationId)).find((t) => t.seq === 3);
      assert.equal(third?.runtime_session_id, sessionId);
      assert.deepEqual([third?.usage?.['input_tokens'], third?.usage?.['output_tokens']], [260, 3]);
      const request = a.fake.requests().findLast((r) => r.text.includes(marker(3)));
      assert.ok(request?.text.includes(marker(1)) && request.text.includes(marker(2)), 'the whole history');
    });

    if (gateway !== 'route') return;
    it('without the provider key the turn fails at once with a readable reason (no login, no hang)', async () => {
      const keyless = await a.setup(user, {
        runtime,
        withoutKey: true,
        ...(options.envVars ? { envVars: options.envVars } : {}),
        ...(options.environment ? { environment: options.environment } : {}),
        ...(options.model ? { model: options.model } : {}),
      });
      const conv = await a.h.start(user, {
        agent_id: keyless.agentId,
        vault_id: keyless.vaultId,
        prompt: `${marker(4)}: anything`,
      });
      const turn = await a.followTurn(user, conv.id, undefined, 60_000);
      assert.equal(turn.end.state, 'failed');
      const stderr = turn.messages
        .filter((m) => m.event === 'stderr')
        .map((m) => JSON.parse(m.data ?? '{}').text)
        .join('');
      assert.match(stderr, options.missingCredential);
      assert.ok(
        !a.fake.requests().some((r) => r.text.includes(marker(4))),
        'the CLI never called the provider',
      );
    });

    it('a provider answering a bare 400 ends the turn with an error that says the status, and the URL where Paddock knows it', async () => {
      a.fake.scriptBareStatus(marker(5), 400);
      const conv = await a.h.start(user, {
        agent_id: setup.agentId,
        vault_id: setup.vaultId,
        prompt: `${marker(5)}: anything`,
      });
      const turn = await a.followTurn(user, conv.id, undefined, 60_000);
      assert.equal(turn.end.state, 'failed');
      const errors = (await a.turnEvents(user, conv.id))
        .map((r) => r['event'] as Row)
        .filter((e) => e['kind'] === 'error')
        .map((e) => e['message']);
      assert.ok(errors.length > 0, 'an error event');
      const url = `${a.fake.sandboxUrl}${PROVIDER_ENV[runtime].endpoint}`;
      for (const message of errors) assert.equal(message, options.bareError(url));
      assert.ok(a.fake.requests().some((r) => r.text.includes(marker(5)) && r.status === 400));
    });
  });
}
