// The opencode adapter (runtimes/opencode.ts): the command and config it builds, its shell
// wrapper (run for real with sh), and parseLine against real `opencode run --format json`
// output captured from opencode-ai 1.18.33 against the fake inference provider
// (test/fixtures/agent-output/opencode.jsonl, capture.ts beside it: a shell tool call, the same session resumed with
// a failing command, then a new session the provider answers 401).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { AgentSnapshot, TurnCommand, TurnEvent } from '../../contracts.ts';
import type { TurnUsage } from '../../conversations.tables.ts';
import { addUsage } from '../turn.ts';
import { OPENAI_COMPATIBLE_ID, OPENCODE_CONFIG_DIR, opencodeAdapter } from './opencode.ts';

const FIXTURE = new URL('../../../../test/fixtures/agent-output/opencode.jsonl', import.meta.url);
const KEY = 'sk-opencode-test-secret-91c3';

function build(
  model: string,
  env: Record<string, string>,
  over: Partial<AgentSnapshot> = {},
  resume: string | null = null,
  mcpServers: AgentSnapshot['mcpServers'] = {},
): TurnCommand {
  return opencodeAdapter.buildTurn({
    agent: {
      id: 'a',
      name: 'a',
      runtime: 'opencode',
      model,
      system: null,
      skills: [],
      mcpServers: {},
      environmentId: null,
      ...over,
    },
    prompt: 'EDIT-1 please',
    images: [],
    resumeSessionId: resume,
    mcpServers,
    turnId: 't1',
    env,
  });
}

type Config = {
  enabled_providers: string[];
  model: string;
  small_model: string;
  autoupdate: boolean;
  share: string;
  permission: Record<string, string>;
  provider: Record<
    string,
    { npm?: string; options: Record<string, string>; models: Record<string, unknown> }
  >;
  instructions?: string[];
  mcp?: Record<string, unknown>;
};
const configOf = (cmd: TurnCommand): Config =>
  JSON.parse(cmd.env['OPENCODE_CONFIG_CONTENT'] ?? 'null') as Config;

/** Runs the command's wrapper for real, with `tail` in place of opencode's argv. */
function runWrapper(cmd: TurnCommand, tail: string[], env: Record<string, string>, prompt?: string) {
  const argv = cmd.argv.slice(0, cmd.argv.indexOf('opencode')).concat(tail);
  if (prompt) argv[4] = prompt;
  return spawnSync(argv[0] ?? 'sh', argv.slice(1), {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env },
    encoding: 'utf8',
  });
}

describe('opencode adapter (runtimes/opencode.ts)', () => {
  it('builds opencode run --format json with the model, --session, its own XDG dirs, models fetch and auto-update off', () => {
    const cmd = build('openai/gpt-5.5', { OPENAI_API_KEY: KEY }, {}, 'ses_1');
    assert.deepEqual(cmd.argv.slice(cmd.argv.indexOf('opencode')), [
      'opencode',
      'run',
      '--format',
      'json',
      '-m',
      'openai/gpt-5.5',
      '--session',
      'ses_1',
    ]);
    assert.equal(cmd.env['OPENCODE_DISABLE_MODELS_FETCH'], '1');
    assert.equal(cmd.env['OPENCODE_DISABLE_AUTOUPDATE'], '1');
    assert.equal(cmd.env['XDG_DATA_HOME'], '/home/sandbox/.local/share');
    assert.equal(cmd.env['XDG_CONFIG_HOME'], '/home/sandbox/.config');
    assert.deepEqual(opencodeAdapter.sessionPaths, ['/home/sandbox/.local/share/opencode']);
    assert.ok(!cmd.argv.some((a) => a.includes('EDIT-1')), 'the prompt never travels in argv');
  });

  it('enables only the agent’s provider, with the key by reference and the model declared', () => {
    const cmd = build('openai/gpt-5.5', { OPENAI_API_KEY: KEY });
    const config = configOf(cmd);
    assert.deepEqual(config.enabled_providers, ['openai']);
    assert.equal(config.model, 'openai/gpt-5.5');
    assert.equal(config.small_model, 'openai/gpt-5.5');
    assert.equal(config.autoupdate, false);
    assert.equal(config.share, 'disabled');
    assert.deepEqual(config.permission, { '*': 'allow' });
    assert.deepEqual(config.provider, {
      openai: { options: { apiKey: '{env:OPENAI_API_KEY}' }, models: { 'gpt-5.5': { name: 'gpt-5.5' } } },
    });
    assert.ok(!JSON.stringify(cmd).includes(KEY), 'the key is nowhere in the command');
  });

  it('an OpenAI base URL in the env makes an @ai-sdk/openai-compatible provider under its own id', () => {
    const cmd = build('openai/gpt-5.5', {
      OPENAI_API_KEY: KEY,
      OPENAI_BASE_URL: 'http://inference.test:9/v1/',
    });
    const config = configOf(cmd);
    assert.deepEqual(config.enabled_providers, [OPENAI_COMPATIBLE_ID]);
    assert.equal(config.model, `${OPENAI_COMPATIBLE_ID}/gpt-5.5`);
    assert.equal(cmd.argv[cmd.argv.indexOf('-m') + 1], `${OPENAI_COMPATIBLE_ID}/gpt-5.5`);
    assert.deepEqual(config.provider[OPENAI_COMPATIBLE_ID], {
      npm: '@ai-sdk/openai-compatible',
      name: 'OpenAI-compatible',
      options: { apiKey: '{env:OPENAI_API_KEY}', baseURL: 'http://inference.test:9/v1' },
      models: { 'gpt-5.5': { name: 'gpt-5.5' } },
    });
  });

  it('anthropic and google models read their own variables, base URLs in each CLI’s form', () => {
    const anthropic = configOf(
      build('anthropic/claude-sonnet-4-5', { ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: 'http://a.test:1' }),
    );
    assert.deepEqual(anthropic.enabled_providers, ['anthropic']);
    assert.deepEqual(anthropic.provider['anthropic']?.options, {
      apiKey: '{env:ANTHROPIC_API_KEY}',
      baseURL: 'http://a.test:1/v1',
    });
    for (const name of ['google', 'gemini']) {
      const google = configOf(
        build(`${name}/gemini-2.5-flash`, { GEMINI_API_KEY: KEY, GOOGLE_GEMINI_BASE_URL: 'http://g.test:2' }),
      );
      assert.deepEqual(google.enabled_providers, ['google']);
      assert.equal(google.model, 'google/gemini-2.5-flash');
      assert.deepEqual(google.provider['google']?.options, {
        apiKey: '{env:GEMINI_API_KEY}',
        baseURL: 'http://g.test:2/v1beta',
      });
    }
  });

  it('system prompt as an instructions file (mode 600), MCP servers as local entries', () => {
    const cmd = build('openai/gpt-5.5', { OPENAI_API_KEY: KEY }, { system: 'Be brief.' }, null, {
      tools: { command: 'node', args: ['server.js'], env: { TOKEN: 'x' } },
    });
    const config = configOf(cmd);
    const path = `${OPENCODE_CONFIG_DIR}/paddock-system.md`;
    assert.deepEqual(config.instructions, [path]);
    const file = cmd.files.find((f) => f.path === path);
    assert.equal(file?.content, 'Be brief.');
    assert.equal(file?.mode, 0o600);
    assert.deepEqual(config.mcp, {
      tools: { type: 'local', command: ['node', 'server.js'], environment: { TOKEN: 'x' }, enabled: true },
    });
    assert.equal(configOf(build('openai/gpt-5.5', {})).instructions, undefined);
  });

  it('fails fast without a credential, or with a provider it cannot run: exit 2 and one sentence, opencode never started', () => {
    const missing = runWrapper(build('openai/gpt-5.5', {}), ['sh', '-c', 'echo started'], {});
    assert.equal(missing.status, 2);
    assert.equal(missing.stdout, '');
    assert.match(
      missing.stderr,
      /^paddock: no OpenAI credential for opencode: set one with `paddock credentials set openai`.*a secret OPENAI_API_KEY in the agent's environment or vault\n$/,
    );
    const other = runWrapper(
      build('anthropic/claude-sonnet-4-5', { OPENAI_API_KEY: KEY }),
      ['sh', '-c', 'echo started'],
      { OPENAI_API_KEY: KEY },
    );
    assert.equal(other.status, 2);
    assert.match(other.stderr, /ANTHROPIC_API_KEY/);
    const cmd = build('opencode/big-pickle', { OPENAI_API_KEY: KEY });
    assert.equal(cmd.env['OPENCODE_CONFIG_CONTENT'], undefined);
    const unsupported = runWrapper(cmd, ['sh', '-c', 'echo started'], { OPENAI_API_KEY: KEY });
    assert.equal(unsupported.status, 2);
    assert.equal(unsupported.stdout, '');
    assert.match(unsupported.stderr, /opencode runs models of anthropic, openai or google/);
  });

  it('the wrapper hands the prompt on stdin, gives opencode a fresh TMPDIR and removes it, and keeps its exit code', () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'paddock-opencode-'));
    try {
      const prompt = join(dir, 'prompt.txt');
      writeFileSync(prompt, 'the prompt\n');
      const r = runWrapper(
        build('openai/gpt-5.5', { OPENAI_API_KEY: KEY }),
        ['sh', '-c', 'cat; echo "$TMPDIR"; touch "$TMPDIR/lib.so"; exit 5'],
        { OPENAI_API_KEY: KEY, TMPDIR: dir },
        prompt,
      );
      assert.equal(r.status, 5, r.stderr);
      const [text, tmp] = r.stdout.split('\n');
      assert.equal(text, 'the prompt');
      assert.ok(tmp?.startsWith(dir), tmp);
      assert.equal(existsSync(tmp ?? ''), false, 'the run’s TMPDIR is removed');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads real opencode output into turn events: session, tool call with result, text, usage per step, errors', () => {
    const lines = readFileSync(FIXTURE, 'utf8').split('\n');
    const perLine = lines.map((line) => opencodeAdapter.parseLine(line));
    const events: TurnEvent[] = perLine.flat();
    assert.ok(!events.some((e) => e.kind === 'raw'), 'every captured line is understood');
    assert.deepEqual(
      events.map((e) => e.kind),
      [
        ...['session', 'tool_call', 'tool_result', 'usage', 'session', 'text', 'usage'],
        ...['session', 'tool_call', 'tool_result', 'usage', 'session', 'text', 'usage'],
        ...['session', 'error'],
      ],
    );
    const sessions = events.flatMap((e) => (e.kind === 'session' ? [e.session_id] : []));
    assert.equal(new Set(sessions.slice(0, 4)).size, 1, 'the resumed turn keeps the session');
    assert.notEqual(sessions[4], sessions[0]);
    const call = events.find((e) => e.kind === 'tool_call');
    assert.deepEqual(call, {
      kind: 'tool_call',
      id: call?.kind === 'tool_call' ? call.id : undefined,
      name: 'bash',
      input: { command: 'echo captured > notes.txt && cat notes.txt', description: 'Run the command' },
    });
    const results = events.filter((e) => e.kind === 'tool_result');
    assert.deepEqual(
      results.map((e) => (e.kind === 'tool_result' ? [e.is_error, e.output] : null)),
      [
        [false, 'captured\n'],
        [true, 'cat: missing-file.txt: No such file or directory\n'],
      ],
    );
    assert.deepEqual(
      events.filter((e) => e.kind === 'text'),
      [
        { kind: 'text', text: 'I wrote notes.txt.' },
        { kind: 'text', text: 'That file does not exist.' },
      ],
    );
    // A turn's usage is the sum of its steps (turn.ts adds usage events up); the final step of
    // the first turn carries the fake's 120/30.
    const usages = events.flatMap((e) => (e.kind === 'usage' ? [e.usage] : []));
    assert.deepEqual(usages[1], { input_tokens: 120, output_tokens: 30, cache_read_tokens: 0 });
    const firstTurn = usages
      .slice(0, 2)
      .reduce<TurnUsage | undefined>((sum, u) => addUsage(sum, u), undefined);
    assert.equal(firstTurn?.input_tokens, (usages[0]?.input_tokens ?? 0) + 120);
    assert.ok(
      usages.every((u) => u.cost_usd === undefined),
      'a zero cost (no price known) is not reported',
    );
    assert.deepEqual(events.at(-1), { kind: 'error', message: 'invalid x-api-key' });
  });

  it('keeps unknown and non-JSON lines as raw, ignores blank ones', () => {
    assert.deepEqual(opencodeAdapter.parseLine('{"type":"new_thing","sessionID":"s"}'), [
      { kind: 'raw', line: '{"type":"new_thing","sessionID":"s"}' },
    ]);
    assert.deepEqual(opencodeAdapter.parseLine('Error: boom'), [{ kind: 'raw', line: 'Error: boom' }]);
    assert.deepEqual(opencodeAdapter.parseLine(''), []);
    assert.deepEqual(
      opencodeAdapter.parseLine(
        '{"type":"tool_use","part":{"tool":"bash","callID":"c","state":{"status":"error","input":{},"error":"denied"}}}',
      ),
      [
        { kind: 'tool_call', id: 'c', name: 'bash', input: {} },
        { kind: 'tool_result', id: 'c', is_error: true, output: 'denied' },
      ],
    );
  });

  it('an empty provider error says the status and the URL opencode reports, not only the status text', () => {
    // What opencode 1.18.33 prints for a 400 without a body (captured through the real proxy; the
    // URL given a user, a password and a query, which the message leaves out).
    const bare =
      '{"type":"error","timestamp":1796172314468,"sessionID":"ses_dcbc9a24cffeR51wPD07dRkRf9","error":{"name":"APIError","data":{"message":"Bad Request","statusCode":400,"isRetryable":false,"responseHeaders":{"connection":"keep-alive","transfer-encoding":"chunked"},"responseBody":"","metadata":{"url":"http://u:pw@gateway.lan:4000/v1/chat/completions?key=k1"}}}}';
    assert.deepEqual(opencodeAdapter.parseLine(bare), [
      { kind: 'session', session_id: 'ses_dcbc9a24cffeR51wPD07dRkRf9' },
      {
        kind: 'error',
        message:
          'the provider answered HTTP 400 Bad Request without an error message (http://gateway.lan:4000/v1/chat/completions)',
      },
    ]);
    // A response with a body keeps opencode's own message (the provider's).
    const withBody = bare
      .replace('"responseBody":""', '"responseBody":"{\\"error\\":\\"no\\"}"')
      .replace('"Bad Request"', '"no"');
    assert.deepEqual(opencodeAdapter.parseLine(withBody).at(-1), { kind: 'error', message: 'no' });
  });
});
