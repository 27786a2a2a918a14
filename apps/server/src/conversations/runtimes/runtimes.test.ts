// The runtime adapters build the headless command of each CLI (shared/design/agent-clis.md):
// argv, env and files, and read the session id and usage out of their JSON lines. Issue 10
// runs them against the real CLIs; here the built shapes are pinned. claude and gemini (prompt on
// stdin, their whole dialects) have their own files: claude.test.ts, gemini.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentSnapshot } from '../contracts.ts';
import { defaultRuntimes } from './registry.ts';

const agent = (runtime: AgentSnapshot['runtime']): AgentSnapshot => ({
  id: 'a',
  name: 'a',
  runtime,
  model: 'anthropic/claude-sonnet-4-5',
  system: null,
  skills: [],
  mcpServers: {},
  environmentId: null,
});

const PROMPT = `it's "quoted" $(not run) \`nor this\``;
const image = { mediaType: 'image/png', data: Buffer.from('png') };

function build(runtime: AgentSnapshot['runtime'], resume: string | null = null) {
  return defaultRuntimes(runtime).buildTurn({
    agent: agent(runtime),
    prompt: PROMPT,
    images: [image],
    resumeSessionId: resume,
    mcpServers: {},
    turnId: 't1',
    env: {},
  });
}

describe('runtime adapters (runtimes/*.ts)', () => {
  for (const runtime of ['codex', 'opencode'] as const) {
    it(`${runtime}: the prompt travels as a mode-600 file, never inside the shell script or argv`, () => {
      const cmd = build(runtime);
      assert.equal(cmd.argv[0], 'sh');
      assert.ok(!cmd.argv.some((a) => a.includes(PROMPT)), 'prompt text in argv');
      assert.ok(cmd.argv[2]?.includes('"$(cat "$1")"'));
      assert.ok(cmd.argv[2]?.endsWith('</dev/null'), 'stdin closed');
      const promptFile = cmd.files.find((f) => f.path.endsWith('/prompt.txt'));
      assert.equal(promptFile?.mode, 0o600);
      assert.ok(String(promptFile?.content).startsWith(PROMPT));
      assert.equal(cmd.files.filter((f) => f.path.endsWith('.png')).length, 1);
    });
  }

  it('codex: exec --json with bypass flags, images by -i, resume <thread>; thread id and usage', () => {
    const cmd = build('codex', 'th-1');
    for (const flag of [
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--dangerously-bypass-approvals-and-sandbox',
    ])
      assert.ok(cmd.argv.includes(flag), flag);
    assert.ok(cmd.argv.includes('-i'));
    assert.deepEqual(cmd.argv.slice(cmd.argv.indexOf('resume'), cmd.argv.indexOf('resume') + 2), [
      'resume',
      'th-1',
    ]);
    const adapter = defaultRuntimes('codex');
    assert.deepEqual(adapter.parseLine('{"type":"thread.started","thread_id":"th-1"}'), [
      { kind: 'session', session_id: 'th-1' },
    ]);
    assert.deepEqual(
      adapter.parseLine(
        '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":2,"output_tokens":3}}',
      ),
      [{ kind: 'usage', usage: { input_tokens: 1, output_tokens: 3, cache_read_tokens: 2 } }],
    );
  });

  it('opencode: run --format json, models fetch and auto-update off, --session, sessionID and step usage', () => {
    const cmd = build('opencode', 'o-1');
    assert.ok(cmd.argv.includes('run') && cmd.argv.includes('json'));
    assert.equal(cmd.env['OPENCODE_DISABLE_MODELS_FETCH'], '1');
    assert.equal(cmd.env['OPENCODE_DISABLE_AUTOUPDATE'], '1');
    assert.deepEqual(cmd.argv.slice(cmd.argv.indexOf('--session'), cmd.argv.indexOf('--session') + 2), [
      '--session',
      'o-1',
    ]);
    assert.deepEqual(
      defaultRuntimes('opencode').parseLine(
        '{"type":"step_finish","sessionID":"o-1","part":{"tokens":{"input":4,"output":6,"cache":{"read":1}},"cost":0.2}}',
      ),
      [
        { kind: 'session', session_id: 'o-1' },
        { kind: 'usage', usage: { input_tokens: 4, output_tokens: 6, cache_read_tokens: 1, cost_usd: 0.2 } },
      ],
    );
  });
});
