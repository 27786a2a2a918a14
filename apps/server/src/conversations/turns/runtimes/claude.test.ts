// The Claude Code adapter: the headless command it builds (run through the real shell wrapper
// with a stand-in CLI) and its reading of REAL stream-json output, captured from claude 2.1.330
// against the fake provider (test/fixtures/agent-output/claude.jsonl, capture.ts beside it).
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
import { claudeAdapter } from './claude.ts';

const { agent, build } = adapterBuilder(claudeAdapter, 'anthropic/claude-sonnet-4-5');

/** The CLI's own arguments (after `sh -c <script> $0 <prompt file> <message>`). */
const cliArgs = (argv: string[]) => argv.slice(6);

let box: CommandSandbox;
before(() => {
  box = commandSandbox();
  box.stub('claude', ECHO_CLI);
});
after(() => box?.close());

describe('claude adapter: the command', () => {
  it('runs claude -p with stream-json, verbose, skip-permissions and the model id, stdin from the prompt file', () => {
    const cmd = build();
    assert.deepEqual(cliArgs(cmd.argv), [
      'claude',
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
      '--model',
      'claude-sonnet-4-5',
    ]);
    assert.equal(cmd.cwd, '/home/sandbox');
    assert.equal(cmd.env['IS_SANDBOX'], '1');
    for (const off of [
      'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC',
      'DISABLE_AUTOUPDATER',
      'DISABLE_TELEMETRY',
      'DISABLE_ERROR_REPORTING',
    ])
      assert.equal(cmd.env[off], '1', off);
  });

  it('a 100,000-character multi-byte prompt reaches the CLI byte for byte on stdin, never as an argument', async () => {
    const prompt = `${'é€😀'.repeat(33_333)}x $(rm -rf /) \`id\` "q" 'q'`;
    const cmd = build({ prompt });
    assert.ok(!cmd.argv.some((a) => a.includes(prompt.slice(0, 50))), 'prompt text in argv');
    assert.ok(cmd.argv.every((a) => Buffer.byteLength(a) < 128 * 1024));
    const r = await box.run(cmd, { ANTHROPIC_API_KEY: 'k' });
    assert.equal(r.code, 0, r.stderr);
    const [stdin, argv] = r.stdout.split('\n--argv--\n');
    // Compared without printing 100,000 characters on a failure.
    assert.ok(
      stdin === prompt,
      `stdin differs: ${JSON.stringify(stdin?.slice(-60))} (${stdin?.length} chars)`,
    );
    assert.deepEqual(argv?.trimEnd().split('\n'), cliArgs(cmd.argv).slice(1));
    assert.equal(box.mode('/home/sandbox/.paddock/turns/t1/prompt.txt'), 0o600);
  });

  it('fails fast with a clear message and exit 2 when no Anthropic credential is set (never a login)', async () => {
    const r = await box.run(build());
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '', 'the CLI never started');
    assert.match(
      r.stderr,
      /^paddock: no Anthropic credential: set one with `paddock credentials set anthropic`, the console's Account page or PUT \/api\/account\/inference-credentials\/anthropic, or a secret ANTHROPIC_API_KEY in the agent's environment or vault\n$/,
    );
    const alternatives: Record<string, string>[] = [
      { ANTHROPIC_AUTH_TOKEN: 'gw' },
      { CLAUDE_CODE_OAUTH_TOKEN: 'o' },
    ];
    for (const env of alternatives) {
      assert.equal((await box.run(build(), env)).code, 0, JSON.stringify(env));
    }
  });

  it('system prompt and MCP servers through mode-600 files (secrets never in argv); --resume with the session id', async () => {
    const secret = 'ghp_mcpSecretValue0123456789';
    const cmd = build({
      agent: agent({ system: 'Be terse.' }),
      mcpServers: { gh: { command: 'npx', args: ['-y', 'gh-mcp'], env: { GITHUB_TOKEN: secret } } },
      resumeSessionId: '6e17f7b7-11ae-492e-a7c6-c6bb5a6977d1',
    });
    const args = cliArgs(cmd.argv);
    assert.ok(!cmd.argv.some((a) => a.includes(secret)), 'secret in argv');
    const at = (flag: string) => args[args.indexOf(flag) + 1];
    assert.equal(at('--append-system-prompt-file'), '/home/sandbox/.paddock/turns/t1/system.md');
    assert.ok(args.includes('--mcp-config=/home/sandbox/.paddock/turns/t1/mcp.json'));
    assert.equal(at('--resume'), '6e17f7b7-11ae-492e-a7c6-c6bb5a6977d1');
    await box.run(cmd, { ANTHROPIC_API_KEY: 'k' });
    assert.equal(box.read('/home/sandbox/.paddock/turns/t1/system.md'), 'Be terse.');
    assert.deepEqual(JSON.parse(box.read('/home/sandbox/.paddock/turns/t1/mcp.json')), {
      mcpServers: { gh: { command: 'npx', args: ['-y', 'gh-mcp'], env: { GITHUB_TOKEN: secret } } },
    });
    for (const f of ['system.md', 'mcp.json'])
      assert.equal(box.mode(`/home/sandbox/.paddock/turns/t1/${f}`), 0o600, f);
  });

  it('images are files whose paths the prompt lists; skills and session state in ~/.claude', () => {
    const cmd = build({ images: [{ mediaType: 'image/png', data: Buffer.from('png') }] });
    const prompt = cmd.files.find((f) => f.path.endsWith('prompt.txt'));
    assert.match(
      String(prompt?.content),
      /Attached images:\n\/home\/sandbox\/\.paddock\/turns\/t1\/image-1\.png$/,
    );
    assert.ok(cmd.files.some((f) => f.path.endsWith('image-1.png') && f.mode === 0o600));
    assert.equal(claudeAdapter.skillsDir, '/home/sandbox/.claude/skills');
    assert.deepEqual(claudeAdapter.sessionPaths, ['/home/sandbox/.claude/projects']);
  });
});

describe('claude adapter: reading stream-json', () => {
  const lines = readFileSync(
    new URL('../../../../test/fixtures/agent-output/claude.jsonl', import.meta.url),
    'utf8',
  )
    .split('\n')
    .filter((l) => l !== '');

  it('turns real captured output into the common events, line by line', () => {
    const S1 = '6e17f7b7-11ae-492e-a7c6-c6bb5a6977d1';
    const S2 = 'aa898fba-ae69-469d-880c-4d4256f863a7';
    const expected: TurnEvent[][] = [
      [{ kind: 'session', session_id: S1 }],
      [
        {
          kind: 'tool_call',
          id: 'toolu_DjjyXEzqjRLUU_PL',
          name: 'Bash',
          input: { command: 'echo captured > notes.txt && cat notes.txt', description: 'Run the command' },
        },
      ],
      [{ kind: 'tool_result', id: 'toolu_DjjyXEzqjRLUU_PL', is_error: false, output: 'captured' }],
      [{ kind: 'text', text: 'I wrote notes.txt.' }],
      [
        { kind: 'session', session_id: S1 },
        {
          kind: 'usage',
          usage: { input_tokens: 120, output_tokens: 30, cache_read_tokens: 0, cost_usd: 0.00081 },
        },
      ],
      // The resumed turn: same session; a failing command's result is an error result.
      [{ kind: 'session', session_id: S1 }],
      [
        {
          kind: 'tool_call',
          id: 'toolu_hkqejYzjO_sgFG5N',
          name: 'Bash',
          input: { command: 'cat missing-file.txt', description: 'Run the command' },
        },
      ],
      [
        {
          kind: 'tool_result',
          id: 'toolu_hkqejYzjO_sgFG5N',
          is_error: true,
          output: 'Exit code 1\ncat: missing-file.txt: No such file or directory',
        },
      ],
      [{ kind: 'text', text: 'That file does not exist.' }],
      [
        { kind: 'session', session_id: S1 },
        // This turn's cost (model_usage_since_last_result), not the session's total_cost_usd (0.00147).
        {
          kind: 'usage',
          usage: { input_tokens: 160, output_tokens: 12, cache_read_tokens: 0, cost_usd: 0.00066 },
        },
      ],
      // The provider answering 401: the CLI's own error message, once.
      [{ kind: 'session', session_id: S2 }],
      [
        {
          kind: 'error',
          message:
            "Invalid API key · Fix external API key: the provider refused the Anthropic credential; replace it with `paddock credentials set anthropic` or on the console's Account page, or fix the ANTHROPIC_API_KEY secret that sets it",
        },
      ],
      [
        { kind: 'session', session_id: S2 },
        { kind: 'usage', usage: { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cost_usd: 0 } },
      ],
    ];
    const got = lines.map((l) => claudeAdapter.parseLine(l));
    assert.equal(got.length, expected.length);
    for (let i = 0; i < got.length; i++) {
      const usage = got[i]?.find((e) => e.kind === 'usage');
      if (usage?.kind === 'usage' && usage.usage.cost_usd !== undefined)
        usage.usage.cost_usd = Math.round(usage.usage.cost_usd * 1e8) / 1e8;
      assert.deepEqual(got[i], expected[i], `line ${i + 1}`);
    }
  });

  it('keeps what it does not understand as raw (other types, text that is not JSON); blank lines say nothing', () => {
    const unknown = '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}';
    assert.deepEqual(claudeAdapter.parseLine(unknown), [{ kind: 'raw', line: unknown }]);
    assert.deepEqual(claudeAdapter.parseLine('npm WARN something'), [
      { kind: 'raw', line: 'npm WARN something' },
    ]);
    assert.deepEqual(claudeAdapter.parseLine('{"type":"result"'), [
      { kind: 'raw', line: '{"type":"result"' },
    ]);
    assert.deepEqual(claudeAdapter.parseLine('  '), []);
  });

  it('a retried model request is an error event per attempt (the CLI retries for minutes otherwise unseen)', () => {
    // As the CLI printed it when its proxy refused the provider's host.
    const line =
      '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":619,"error_status":null,"error":"unknown","session_id":"17914142-b3bb-416e-b5bd-db8e2925d18d","uuid":"b4616b28-f95b-497b-9160-ee35625f3f27"}';
    assert.deepEqual(claudeAdapter.parseLine(line), [
      {
        kind: 'error',
        message: 'the model API request failed (no answer); retrying in 0.6 s (attempt 1 of 10)',
      },
    ]);
    const overloaded = JSON.stringify({
      type: 'system',
      subtype: 'api_retry',
      attempt: 3,
      max_retries: 10,
      retry_delay_ms: 2331,
      error_status: 529,
      error: 'overloaded_error',
    });
    assert.deepEqual(claudeAdapter.parseLine(overloaded), [
      {
        kind: 'error',
        message:
          'the model API request failed (HTTP 529, overloaded_error); retrying in 2.3 s (attempt 3 of 10)',
      },
    ]);
    // Other system lines (hooks, compaction notices) say nothing.
    assert.deepEqual(claudeAdapter.parseLine('{"type":"system","subtype":"compact_boundary"}'), []);
  });

  it('a "Failed to authenticate" on the egress proxy\'s 403 reads as a network refusal, not a key problem', () => {
    // Captured from claude 2.1.330 with ANTHROPIC_BASE_URL on a listener giving sandboxd's 403.
    const refused = (reason: string) =>
      JSON.stringify({
        type: 'assistant',
        message: {
          id: 'e47afff7-fd93-4976-b76c-5caa6cc333f5',
          model: '<synthetic>',
          role: 'assistant',
          type: 'message',
          content: [{ type: 'text', text: `Failed to authenticate. API Error: 403 ${reason}` }],
        },
        error: 'authentication_failed',
      });
    const [denied] = claudeAdapter.parseLine(
      refused('egress to api.anthropic.com is denied by the sandbox network policy'),
    );
    assert.equal(denied?.kind, 'error');
    const message = denied?.kind === 'error' ? denied.message : '';
    assert.match(message, /^the sandbox network policy refused the model API's host, so no key was checked/);
    assert.match(message, /networking_config\.allowed_hosts/);
    assert.doesNotMatch(message, /credentials set|Account page/);
    const [private_] = claudeAdapter.parseLine(
      refused('egress to api.anthropic.com is refused: not a public address'),
    );
    assert.match(private_?.kind === 'error' ? private_.message : '', /SANDBOXD_EGRESS_ALLOW_CIDRS/);
  });

  it('a refused key says where to replace it', () => {
    const line = JSON.stringify({
      type: 'assistant',
      message: { content: [{ type: 'text', text: 'Invalid API key · Fix external API key' }] },
      error: 'authentication_failed',
    });
    assert.deepEqual(claudeAdapter.parseLine(line), [
      {
        kind: 'error',
        message:
          "Invalid API key · Fix external API key: the provider refused the Anthropic credential; replace it with `paddock credentials set anthropic` or on the console's Account page, or fix the ANTHROPIC_API_KEY secret that sets it",
      },
    ]);
  });

  it('a result with an error subtype is an error event (max turns, execution errors)', () => {
    const line = JSON.stringify({
      type: 'result',
      subtype: 'error_max_turns',
      is_error: true,
      session_id: 's',
      usage: { input_tokens: 1, output_tokens: 2 },
    });
    assert.deepEqual(claudeAdapter.parseLine(line), [
      { kind: 'session', session_id: 's' },
      { kind: 'usage', usage: { input_tokens: 1, output_tokens: 2 } },
      { kind: 'error', message: 'the turn ended with error_max_turns' },
    ]);
  });
});
