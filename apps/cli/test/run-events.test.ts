// `paddock run` / `prompt` / `logs` showing a claude turn for a person (issue 10 item 7), as a
// child process against the real server and sandboxd. The turn prints real claude stream-json
// lines (captured from the CLI against the fake provider, fixtures/agent-output/claude.jsonl)
// and its adapter reads them with the real claude adapter's parseLine: the rendering below is
// what a person sees of a real claude turn.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { RuntimeAdapter } from '../../server/src/conversations/contracts.ts';
import { claudeAdapter } from '../../server/src/conversations/turns/runtimes/claude.ts';
import { scriptedAdapter } from '../../server/test/fixtures/scripted-runtime.ts';
import {
  type ConversationHarness,
  startConversationHarness,
} from '../../server/test/helpers/conversations.ts';
import type { TestUser } from '../../server/test/helpers/factories.ts';

const here = dirname(fileURLToPath(import.meta.url));
const BIN = join(here, '..', 'bin', 'paddock.mjs');
const CAPTURED = readFileSync(
  join(here, '..', '..', 'server', 'test', 'fixtures', 'agent-output', 'claude.jsonl'),
  'utf8',
)
  .trimEnd()
  .split('\n');
// The capture's turn 1 (a shell tool call that succeeds, a final message, the result line) and
// turn 2 (a tool call that fails, a final message, the result line).
const TURN_1 = CAPTURED.slice(0, 5);
const TURN_2 = CAPTURED.slice(5, 10);

/** The scripted turn (the prompt is its shell script) prints the lines as claude would. */
const printing = (lines: string[], extra = '') =>
  `cat <<'PADDOCK_CLAUDE_LINES'\n${lines.join('\n')}\nPADDOCK_CLAUDE_LINES\n${extra}`;

const claudeLines: RuntimeAdapter = { ...scriptedAdapter, parseLine: claudeAdapter.parseLine };

let h: ConversationHarness;
let user: TestUser;
let agentName: string;
const temps: string[] = [];

before(async () => {
  h = await startConversationHarness({ engine: { runtimes: (runtime) => ({ ...claudeLines, runtime }) } });
  user = await h.user();
  agentName = `claude-${Date.now().toString(36)}`;
  await h.agent(user, { name: agentName });
});
after(async () => {
  const list = await h.api(user, 'GET', '/api/conversations?limit=200');
  for (const c of (list.body?.data ?? []) as { id: string }[])
    await h.api(user, 'DELETE', `/api/conversations/${c.id}`);
  await h.close();
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function paddock(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const home = mkdtempSync(join(tmpdir(), 'paddock-cli-events-'));
  temps.push(home);
  const child = spawn(process.execPath, [BIN, ...args], {
    env: {
      PATH: process.env['PATH'],
      HOME: home,
      XDG_CONFIG_HOME: join(home, 'config'),
      PADDOCK_URL: h.url,
      PADDOCK_API_KEY: user.apiKey,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += String(d);
  });
  child.stderr.on('data', (d) => {
    stderr += String(d);
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

/** stderr from the turn's start on, durations normalised (they vary run to run). */
const fromTurn = (stderr: string) =>
  stderr
    .slice(stderr.indexOf('[turn] started'))
    .replace(/ in \d+(\.\d+)?(ms|s)\b/g, ' in <t>')
    .replace(/ in \d+m \d+s\b/g, ' in <t>');

let conversationId = '';

describe('a claude turn rendered for a person', () => {
  it('paddock run -f: the assistant text on stdout; tool calls with their result, usage and stages on stderr', async () => {
    const run = await paddock(['run', agentName, printing(TURN_1, 'echo "not a JSON line"'), '-f']);
    assert.equal(run.code, 0, run.stderr);
    conversationId = /conversation ([0-9a-f-]{36}) started/.exec(run.stderr)?.[1] ?? '';
    assert.equal(run.stdout, 'I wrote notes.txt.\nnot a JSON line\n');
    assert.equal(
      fromTurn(run.stderr),
      [
        '[turn] started',
        '▸ Bash  echo captured > notes.txt && cat notes.txt ✓',
        'tokens in 120 · out 30 · cached 0 · $0.0008',
        '[turn] done in <t>',
        '',
      ].join('\n'),
    );
    assert.match(run.stderr, /\[provision\] done in /);
    assert.ok(!run.stdout.includes('"type"') && !run.stderr.includes('"type"'), 'no raw JSON line shown');
  });

  it('paddock prompt -f: a failing tool call shows ✗ with the first line of its result', async () => {
    const run = await paddock(['prompt', conversationId, printing(TURN_2), '-f']);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'That file does not exist.\n');
    assert.equal(
      fromTurn(run.stderr),
      [
        '[turn] started',
        '▸ Bash  cat missing-file.txt ✗ Exit code 1',
        'tokens in 160 · out 12 · cached 0 · $0.0007',
        '[turn] done in <t>',
        '',
      ].join('\n'),
    );
  });

  it('paddock logs shows both turns the same way; --raw shows the raw stream-json lines as before', async () => {
    const logs = await paddock(['logs', conversationId]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.equal(logs.stdout, 'I wrote notes.txt.\nnot a JSON line\nThat file does not exist.\n');
    const turns = logs.stderr.replace(/ in \d+(\.\d+)?(ms|s)\b/g, ' in <t>');
    assert.ok(
      turns.includes(
        [
          '▸ Bash  echo captured > notes.txt && cat notes.txt ✓',
          'tokens in 120 · out 30 · cached 0 · $0.0008',
          '[turn] done in <t>',
        ].join('\n'),
      ),
      turns,
    );
    assert.ok(turns.includes('▸ Bash  cat missing-file.txt ✗ Exit code 1\n'), turns);

    const raw = await paddock(['logs', conversationId, '--raw']);
    assert.equal(raw.code, 0, raw.stderr);
    assert.equal(raw.stdout, [...TURN_1, 'not a JSON line', ...TURN_2, ''].join('\n'));
    assert.ok(!raw.stderr.includes('▸'));
  });

  it('-o json prints the turn events as the API sends them, between the other events', async () => {
    const json = await paddock(['logs', conversationId, '-o', 'json']);
    assert.equal(json.code, 0, json.stderr);
    const events = json.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { stream: string; event?: { kind: string } });
    const kinds = events.filter((e) => e.stream === 'events').map((e) => e.event?.kind);
    assert.deepEqual(kinds.slice(0, 7), [
      'session',
      'tool_call',
      'tool_result',
      'text',
      'session',
      'usage',
      'raw',
    ]);
    assert.ok(events.some((e) => e.stream === 'stdout'));
    assert.ok(events.some((e) => e.stream === 'stage'));
  });
});
