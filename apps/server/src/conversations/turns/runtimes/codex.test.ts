// The Codex adapter (runtimes/codex.ts): the command it builds, the config.toml it writes, its
// shell wrapper (run for real with sh), and parseLine against real `codex exec --json` output
// captured from @openai/codex 0.169.0 against the fake inference provider
// (test/fixtures/agent-output/codex.jsonl, capture.ts beside it: a shell tool call, the same thread resumed with a
// failing command, then a new thread the provider answers 401).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { AgentSnapshot, TurnCommand, TurnEvent } from '../../contracts.ts';
import { addUsage } from '../turn.ts';
import { CODEX_HOME, CODEX_NO_CREDENTIAL, codexAdapter } from './codex.ts';

const FIXTURE = new URL('../../../../test/fixtures/agent-output/codex.jsonl', import.meta.url);
const KEY = 'sk-codex-test-secret-5f2a';

const agent = (over: Partial<AgentSnapshot> = {}): AgentSnapshot => ({
  id: 'a',
  name: 'a',
  runtime: 'codex',
  model: 'openai/gpt-5.5',
  system: null,
  skills: [],
  mcpServers: {},
  environmentId: null,
  ...over,
});

function build(
  over: Partial<AgentSnapshot> = {},
  env: Record<string, string> = { OPENAI_API_KEY: KEY },
  resume: string | null = null,
  mcpServers: AgentSnapshot['mcpServers'] = {},
): TurnCommand {
  return codexAdapter.buildTurn({
    agent: agent(over),
    prompt: 'EDIT-1 please',
    images: [],
    resumeSessionId: resume,
    mcpServers,
    turnId: 't1',
    env,
  });
}

const configOf = (cmd: TurnCommand): string =>
  String(cmd.files.find((f) => f.path === `${CODEX_HOME}/config.toml`)?.content ?? '');

/** Runs the command's wrapper for real, with `tail` in place of Codex's argv. */
function runWrapper(cmd: TurnCommand, tail: string[], env: Record<string, string>) {
  const argv = cmd.argv.slice(0, cmd.argv.indexOf('codex')).concat(tail);
  return spawnSync(argv[0] ?? 'sh', argv.slice(1), {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env },
    encoding: 'utf8',
  });
}

describe('codex adapter (runtimes/codex.ts)', () => {
  it('builds codex exec --json with the bypass flags, the prompt on stdin and resume <thread> -', () => {
    const cmd = build({}, { OPENAI_API_KEY: KEY }, 'th-1');
    const codex = cmd.argv.slice(cmd.argv.indexOf('codex'));
    assert.deepEqual(codex, [
      'codex',
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--dangerously-bypass-approvals-and-sandbox',
      '-m',
      'gpt-5.5',
      'resume',
      'th-1',
      '-',
    ]);
    assert.equal(cmd.env['CODEX_HOME'], CODEX_HOME);
    assert.equal(cmd.cwd, '/home/sandbox');
    assert.ok(!cmd.argv.some((a) => a.includes('EDIT-1')), 'the prompt never travels in argv');
    assert.equal(build().argv.includes('resume'), false);
  });

  it('writes a config.toml that never uses the default provider (Responses over HTTP, no retries, base URL from the env)', () => {
    const cmd = build({}, { OPENAI_API_KEY: KEY, OPENAI_BASE_URL: 'http://inference.test:9/v1' });
    const file = cmd.files.find((f) => f.path === `${CODEX_HOME}/config.toml`);
    assert.equal(file?.mode, 0o600);
    const config = configOf(cmd);
    for (const line of [
      'model = "gpt-5.5"',
      'model_provider = "paddock"',
      'approval_policy = "never"',
      'check_for_update_on_startup = false',
      '[model_providers.paddock]',
      'base_url = "http://inference.test:9/v1"',
      'env_key = "OPENAI_API_KEY"',
      'wire_api = "responses"',
      'supports_websockets = false',
      'request_max_retries = 0',
      'stream_max_retries = 0',
      '[analytics]\nenabled = false',
      '[features]\nplugins = false',
    ])
      assert.ok(config.includes(line), line);
    assert.ok(configOf(build()).includes('base_url = "https://api.openai.com/v1"'), 'the default base URL');
    // The key is read by Codex from the env: never written, never in argv or the exec env.
    const everything = JSON.stringify(cmd);
    assert.ok(!everything.includes(KEY), 'the key is nowhere in the command');
  });

  it('puts the system prompt in developer_instructions and MCP servers in [mcp_servers], TOML-escaped', () => {
    const config = configOf(
      build({ system: 'Say "hi"\nthen \\ stop' }, { OPENAI_API_KEY: KEY }, null, {
        'my tools': { command: 'node', args: ['server.js', '--name="x"'], env: { TOKEN: 'a"b' } },
      }),
    );
    assert.ok(config.includes('developer_instructions = "Say \\"hi\\"\\nthen \\\\ stop"'), config);
    assert.ok(
      config.includes('[mcp_servers."my tools"]\ncommand = "node"\nargs = ["server.js", "--name=\\"x\\""]'),
    );
    assert.ok(config.includes('env = { TOKEN = "a\\"b" }'));
  });

  it('fails fast without a credential: exit 2 and one sentence on stderr, Codex never started', () => {
    const cmd = build({}, {});
    const r = runWrapper(cmd, ['sh', '-c', 'echo started'], {});
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, `${CODEX_NO_CREDENTIAL}\n`);
  });

  it("the wrapper hands the prompt on stdin and reports this turn's usage from the thread's rollout totals", () => {
    const home = mkdtempSync(join(os.tmpdir(), 'paddock-codex-'));
    try {
      const thread = '01a20ca9-8327-7840-b47a-03d62c1e3411';
      const rollout = join(home, 'sessions/2026/11/24', `rollout-2026-11-24T08-16-12-${thread}.jsonl`);
      // A token_count line as Codex 0.169.0 writes it into the rollout (totals per thread).
      const tokenLine = (input: number, output: number) =>
        `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":${input},"cached_input_tokens":0,"output_tokens":${output},"total_tokens":${input + output}},"last_token_usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1,"total_tokens":2}}}}`;
      const prompt = join(home, 'prompt.txt');
      writeFileSync(prompt, 'the prompt\n');
      const fakeCodex = (input: number, output: number) => [
        'sh',
        '-c',
        'cat; mkdir -p "$(dirname "$1")"; printf "%s\\n" "$2" >> "$1"',
        'codex',
        rollout,
        tokenLine(input, output),
      ];
      const env = { OPENAI_API_KEY: KEY, CODEX_HOME: home };
      // A new thread: no totals before.
      const first = build();
      first.argv[first.argv.indexOf('codex') - 3] = prompt;
      const r1 = runWrapper(first, fakeCodex(120, 30), env);
      assert.equal(r1.status, 0, r1.stderr);
      const lines1 = r1.stdout.split('\n');
      assert.equal(lines1[0], 'the prompt');
      const usage1 = lines1.slice(1).flatMap((l) => codexAdapter.parseLine(l));
      assert.deepEqual(usage1, [
        { kind: 'usage', usage: { input_tokens: 120, output_tokens: 30, cache_read_tokens: 0 } },
      ]);
      // The same thread resumed: the totals grow to 280/42, this turn used 160/12.
      const second = build({}, { OPENAI_API_KEY: KEY }, thread);
      second.argv[second.argv.indexOf('codex') - 3] = prompt;
      const r2 = runWrapper(second, fakeCodex(280, 42), env);
      assert.equal(r2.status, 0, r2.stderr);
      const usage2 = r2.stdout
        .split('\n')
        .slice(1)
        .flatMap((l) => codexAdapter.parseLine(l));
      assert.deepEqual(usage2, [
        { kind: 'usage', usage: { input_tokens: 160, output_tokens: 12, cache_read_tokens: 0 } },
      ]);
      // A run that writes no rollout of its own (Codex failed early) reports no usage, and
      // the CLI's exit code is the turn's.
      const third = build();
      third.argv[third.argv.indexOf('codex') - 3] = prompt;
      const r3 = runWrapper(third, ['sh', '-c', 'cat >/dev/null; exit 7'], env);
      assert.equal(r3.status, 7);
      assert.equal(r3.stdout, '');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('reads real Codex output into turn events: session, tool call and result, text, this turn’s usage, errors', () => {
    const lines = readFileSync(FIXTURE, 'utf8').split('\n');
    const events: TurnEvent[] = lines.flatMap((line) => codexAdapter.parseLine(line));
    assert.ok(!events.some((e) => e.kind === 'raw'), 'every captured line is understood');
    const kinds = events.map((e) => e.kind);
    assert.deepEqual(kinds, [
      'session',
      'tool_call',
      'tool_result',
      'text',
      'usage',
      'session',
      'tool_call',
      'tool_result',
      'text',
      'usage',
      'session',
      'error',
    ]);
    const [s1, call1, result1, text1, usage1, s2, , result2, , usage2, s3, error] = events;
    assert.equal(s1?.kind === 'session' && s2?.kind === 'session' && s1.session_id === s2.session_id, true);
    assert.notDeepEqual(s3, s1, 'a new thread');
    assert.deepEqual(call1, {
      kind: 'tool_call',
      id: 'item_0',
      name: 'command_execution',
      input: { command: "/bin/bash -lc 'echo captured > notes.txt && cat notes.txt'" },
    });
    assert.deepEqual(result1, { kind: 'tool_result', id: 'item_0', is_error: false, output: 'captured\n' });
    assert.deepEqual(text1, { kind: 'text', text: 'I wrote notes.txt.' });
    assert.equal(result2?.kind === 'tool_result' && result2.is_error, true, 'a failing command is an error');
    // Codex's own totals were 120/30, then 280/42 for the thread: each turn's share is reported.
    assert.deepEqual(usage1, {
      kind: 'usage',
      usage: { input_tokens: 120, output_tokens: 30, cache_read_tokens: 0 },
    });
    assert.deepEqual(usage2, {
      kind: 'usage',
      usage: { input_tokens: 160, output_tokens: 12, cache_read_tokens: 0 },
    });
    assert.match(error?.kind === 'error' ? error.message : '', /401 Unauthorized: invalid x-api-key/);
  });

  it('keeps unknown and non-JSON lines as raw, ignores blank ones, and never throws', () => {
    assert.deepEqual(codexAdapter.parseLine('{"type":"something.new","x":1}'), [
      { kind: 'raw', line: '{"type":"something.new","x":1}' },
    ]);
    assert.deepEqual(codexAdapter.parseLine('not json'), [{ kind: 'raw', line: 'not json' }]);
    assert.deepEqual(codexAdapter.parseLine('   '), []);
    assert.deepEqual(codexAdapter.parseLine('{"type":"item.completed","item":{"type":"agent_message"}}'), [
      { kind: 'raw', line: '{"type":"item.completed","item":{"type":"agent_message"}}' },
    ]);
    assert.deepEqual(codexAdapter.parseLine('{"type":"paddock.usage","before":null,"after":"x"}'), []);
  });

  it('usage events add up over a turn (turn.ts addUsage)', () => {
    assert.deepEqual(addUsage(addUsage(undefined, { input_tokens: 2, cost_usd: 0.5 }), { input_tokens: 3 }), {
      input_tokens: 5,
      cost_usd: 0.5,
    });
  });

  it('an empty provider error says the status and the URL: the wrapper prints the URL Codex posts to first, origin and path only', () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'paddock-codex-'));
    try {
      const cmd = build(
        {},
        { OPENAI_API_KEY: KEY, OPENAI_BASE_URL: 'http://u:pw@gateway.lan:4000/v1/?key=k1' },
      );
      // The turn's files as the server writes them: the prompt and, beside it, the provider line.
      const prompt = join(dir, 'prompt.txt');
      writeFileSync(prompt, 'the prompt\n');
      const provider = cmd.files.find((f) => f.path.endsWith('/t1/provider.json'));
      writeFileSync(join(dir, 'provider.json'), String(provider?.content));
      cmd.argv[cmd.argv.indexOf('codex') - 3] = prompt;
      // What Codex 0.169.0 prints for a 400 without a body (it prints a 400's body as the message).
      const printed = ['{"type":"error","message":""}', '{"type":"turn.failed","error":{"message":""}}'];
      const r = runWrapper(
        cmd,
        ['sh', '-c', 'cat >/dev/null; printf "%s\\n" "$@"; exit 1', 'codex', ...printed],
        {
          OPENAI_API_KEY: KEY,
          CODEX_HOME: dir,
        },
      );
      assert.equal(r.status, 1, r.stderr);
      assert.ok(!/pw|k1/.test(r.stdout), 'no userinfo or query of the base URL');
      const memory = new Map<string, string>();
      const events = r.stdout.split('\n').flatMap((l) => codexAdapter.parseLine(l, memory));
      assert.deepEqual(events, [
        {
          kind: 'error',
          message:
            'the provider answered HTTP 400 Bad Request without an error message (http://gateway.lan:4000/v1/responses)',
        },
      ]);
      // Without the wrapper's line (a reattach whose replay lost its head) the status still shows.
      assert.deepEqual(codexAdapter.parseLine(printed[0] ?? ''), [
        { kind: 'error', message: 'the provider answered HTTP 400 Bad Request without an error message' },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
