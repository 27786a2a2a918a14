// The runtime adapters build the headless command of each CLI (shared/design/agent-clis.md):
// argv, env and files, and read the session id and usage out of their JSON lines. Issue 10
// runs them against the real CLIs; here what codex and opencode share is pinned. Each runtime's
// own command and dialect have their own files: claude.test.ts, gemini.test.ts, codex.test.ts,
// opencode.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentSnapshot } from '../../contracts.ts';
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
    it(`${runtime}: the prompt travels as a mode-600 file read on stdin, never inside the shell script or argv`, () => {
      const cmd = build(runtime);
      assert.equal(cmd.argv[0], 'sh');
      assert.ok(!cmd.argv.some((a) => a.includes(PROMPT)), 'prompt text in argv');
      const promptFile = cmd.files.find((f) => f.path.endsWith('/prompt.txt'));
      assert.equal(promptFile?.mode, 0o600);
      assert.equal(promptFile?.content, PROMPT);
      assert.equal(cmd.argv[4], promptFile?.path, 'the wrapper gets the prompt file as $1');
      assert.ok(cmd.argv[2]?.includes('<"$p"'), 'stdin is the prompt file');
      const images = cmd.files.filter((f) => f.path.endsWith('.png'));
      assert.equal(images.length, 1);
      assert.equal(images[0]?.mode, 0o600);
      const at = cmd.argv.indexOf(images[0]?.path ?? '');
      assert.equal(cmd.argv[at - 1], runtime === 'codex' ? '-i' : '-f', 'the image is attached by path');
    });
  }
});
