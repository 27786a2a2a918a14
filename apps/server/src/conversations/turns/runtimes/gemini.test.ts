// The Gemini CLI adapter: the headless command it builds (run through the real shell wrapper
// with a stand-in CLI) and its reading of REAL stream-json output, captured from gemini 0.61.0
// against the fake provider (test/fixtures/agent-output/gemini.jsonl, capture.ts beside it).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import {
  adapterBuilder,
  type CommandSandbox,
  commandSandbox,
  ECHO_CLI,
} from '../../../../test/helpers/runtime-command.ts';
import type { TurnEvent } from '../../contracts.ts';
import { GEMINI_CONTEXT_PATH, GEMINI_SETTINGS_PATH, geminiAdapter } from './gemini.ts';

const { agent, build } = adapterBuilder(geminiAdapter, 'google/gemini-2.5-flash');

const cliArgs = (argv: string[]) => argv.slice(6);

let box: CommandSandbox;
before(() => {
  box = commandSandbox();
  box.stub('gemini', ECHO_CLI);
});
after(() => box?.close());

describe('gemini adapter: the command', () => {
  it('runs gemini -p with stream-json, the model id and yolo approval; trusted workspace, one process', () => {
    const cmd = build();
    assert.deepEqual(cliArgs(cmd.argv), [
      'gemini',
      '-p',
      '',
      '--output-format',
      'stream-json',
      '-m',
      'gemini-2.5-flash',
      '--approval-mode',
      'yolo',
    ]);
    assert.equal(cmd.cwd, '/home/sandbox');
    assert.equal(cmd.env['GEMINI_CLI_TRUST_WORKSPACE'], 'true');
    assert.equal(cmd.env['GEMINI_CLI_NO_RELAUNCH'], 'true');
  });

  it('a 100,000-character multi-byte prompt reaches the CLI byte for byte on stdin, never as an argument', async () => {
    const prompt = `${'é€😀'.repeat(33_333)}x $(rm -rf /) \`id\` "q" 'q'`;
    const cmd = build({ prompt });
    assert.ok(!cmd.argv.some((a) => a.includes(prompt.slice(0, 50))), 'prompt text in argv');
    assert.ok(cmd.argv.every((a) => Buffer.byteLength(a) < 128 * 1024));
    const r = await box.run(cmd, { GEMINI_API_KEY: 'k' });
    assert.equal(r.code, 0, r.stderr);
    const [stdin, argv] = r.stdout.split('\n--argv--\n');
    // Compared without printing 100,000 characters on a failure.
    assert.ok(
      stdin === prompt,
      `stdin differs: ${JSON.stringify(stdin?.slice(-60))} (${stdin?.length} chars)`,
    );
    assert.deepEqual(argv?.split('\n').slice(0, -1), cliArgs(cmd.argv).slice(1));
  });

  it('fails fast with a clear message and exit 2 when no Gemini credential is set (never a login)', async () => {
    const r = await box.run(build());
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '', 'the CLI never started');
    assert.equal(
      r.stderr,
      "paddock: no Gemini credential: set one with `paddock credentials set gemini`, the console's Account page or PUT /api/account/inference-credentials/gemini, or a secret GEMINI_API_KEY in the agent's environment or vault\n",
    );
  });

  it('settings.json (mode 600): API-key auth, MCP servers with their substituted env, telemetry, statistics, auto-update and terminal warnings off', async () => {
    const secret = 'ghp_mcpSecretValue0123456789';
    const cmd = build({
      mcpServers: { gh: { command: 'npx', args: ['-y', 'gh-mcp'], env: { GITHUB_TOKEN: secret } } },
    });
    assert.ok(!cmd.argv.some((a) => a.includes(secret)), 'secret in argv');
    await box.run(cmd, { GEMINI_API_KEY: 'k' });
    assert.deepEqual(JSON.parse(box.read(GEMINI_SETTINGS_PATH)), {
      security: { auth: { selectedType: 'gemini-api-key' } },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      // Else the CLI prints "Warning: 256-color support not detected. …" on every turn's stderr.
      ui: { showCompatibilityWarnings: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      mcpServers: { gh: { command: 'npx', args: ['-y', 'gh-mcp'], env: { GITHUB_TOKEN: secret } } },
    });
    assert.equal(box.mode(GEMINI_SETTINGS_PATH), 0o600);
  });

  it('the system prompt is ~/.gemini/GEMINI.md, rewritten every turn (empty once removed); --resume with the session id', async () => {
    await box.run(build({ agent: agent({ system: 'Be terse.' }) }), { GEMINI_API_KEY: 'k' });
    assert.equal(box.read(GEMINI_CONTEXT_PATH), 'Be terse.');
    assert.equal(box.mode(GEMINI_CONTEXT_PATH), 0o600);
    const cmd = build({ resumeSessionId: '52993769-69de-4c13-a948-eff38cd1384a' });
    await box.run(cmd, { GEMINI_API_KEY: 'k' });
    assert.equal(box.read(GEMINI_CONTEXT_PATH), '');
    const args = cliArgs(cmd.argv);
    assert.equal(args[args.indexOf('--resume') + 1], '52993769-69de-4c13-a948-eff38cd1384a');
  });

  it('images as @path references; skills in ~/.gemini/skills; session state: chats and the project map', () => {
    const cmd = build({ images: [{ mediaType: 'image/jpeg', data: Buffer.from('jpg') }] });
    const prompt = cmd.files.find((f) => f.path.endsWith('prompt.txt'));
    assert.equal(String(prompt?.content), 'hello\n\n@/home/sandbox/.paddock/turns/t1/image-1.jpg');
    assert.equal(geminiAdapter.skillsDir, '/home/sandbox/.gemini/skills');
    assert.deepEqual(geminiAdapter.sessionPaths, [
      '/home/sandbox/.gemini/tmp',
      '/home/sandbox/.gemini/projects.json',
      '/home/sandbox/.gemini/history',
    ]);
  });
});

describe('gemini adapter: reading stream-json', () => {
  const lines = readFileSync(
    new URL('../../../../test/fixtures/agent-output/gemini.jsonl', import.meta.url),
    'utf8',
  )
    .split('\n')
    .filter((l) => l !== '');

  it('turns real captured output into the common events, line by line', () => {
    const S1 = '52993769-69de-4c13-a948-eff38cd1384a';
    const T1 = 'run_shell_command__run_shell_command_1795508357180_0';
    const T2 = 'run_shell_command__run_shell_command_1795508378083_0';
    const expected: TurnEvent[][] = [
      [{ kind: 'session', session_id: S1 }],
      [], // the prompt, echoed
      [
        {
          kind: 'tool_call',
          id: T1,
          name: 'run_shell_command',
          input: { command: 'echo captured > notes.txt && cat notes.txt' },
        },
      ],
      [{ kind: 'tool_result', id: T1, is_error: false, output: 'captured' }],
      [{ kind: 'text', text: 'I wrote notes.txt.' }],
      [{ kind: 'usage', usage: { input_tokens: 120, output_tokens: 30, cache_read_tokens: 0 } }],
      // The resumed turn: the same session.
      [{ kind: 'session', session_id: S1 }],
      [],
      [{ kind: 'tool_call', id: T2, name: 'run_shell_command', input: { command: 'cat missing-file.txt' } }],
      // Gemini reports a command's non-zero exit as a successful tool call; its output says why.
      [
        {
          kind: 'tool_result',
          id: T2,
          is_error: false,
          output: 'cat: missing-file.txt: No such file or directory',
        },
      ],
      [{ kind: 'text', text: 'That file does not e' }],
      [{ kind: 'text', text: 'xist.' }],
      [{ kind: 'usage', usage: { input_tokens: 160, output_tokens: 12, cache_read_tokens: 0 } }],
      // The provider answering 401.
      [{ kind: 'session', session_id: 'b7758518-4b75-4f58-98f8-1c3fe6946e9a' }],
      [],
      [
        { kind: 'usage', usage: { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0 } },
        {
          kind: 'error',
          message:
            '[API Error: {"error":{"code":401,"message":"invalid x-api-key","status":"authentication_error"}}]',
        },
      ],
    ];
    const got = lines.map((l) => geminiAdapter.parseLine(l));
    assert.equal(got.length, expected.length);
    for (let i = 0; i < got.length; i++) assert.deepEqual(got[i], expected[i], `line ${i + 1}`);
  });

  it('error lines, failed tool results; what it does not understand stays raw, blank lines say nothing', () => {
    assert.deepEqual(
      geminiAdapter.parseLine(
        '{"type":"error","timestamp":"t","severity":"error","message":"Loop detected"}',
      ),
      [{ kind: 'error', message: 'Loop detected' }],
    );
    assert.deepEqual(
      geminiAdapter.parseLine(
        '{"type":"tool_result","tool_id":"x","status":"error","error":{"type":"invalid_tool_params","message":"bad path"}}',
      ),
      [{ kind: 'tool_result', id: 'x', is_error: true, output: 'bad path' }],
    );
    const unknown = '{"type":"thought","content":"hmm"}';
    assert.deepEqual(geminiAdapter.parseLine(unknown), [{ kind: 'raw', line: unknown }]);
    assert.deepEqual(geminiAdapter.parseLine('Loaded cached credentials.'), [
      { kind: 'raw', line: 'Loaded cached credentials.' },
    ]);
    assert.deepEqual(geminiAdapter.parseLine(''), []);
  });

  it('an API error without a message says the status (the CLI prints an empty JSON error)', () => {
    // What gemini 0.61.0 prints for a 400 without a body (captured through the real proxy).
    const result =
      '{"type":"result","timestamp":"2026-12-02T00:44:56.335Z","status":"error","error":{"type":"unknown","message":"[API Error: {\\"error\\":{\\"message\\":\\"\\",\\"code\\":400,\\"status\\":\\"Bad Request\\"}}]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0}}';
    assert.deepEqual(geminiAdapter.parseLine(result).at(-1), {
      kind: 'error',
      message: 'the provider answered HTTP 400 Bad Request without an error message',
    });
    // An API error with a message keeps it.
    const said = result.replace('\\"message\\":\\"\\"', '\\"message\\":\\"quota\\"');
    assert.match(JSON.stringify(geminiAdapter.parseLine(said).at(-1)), /quota/);
  });
});
