// Codex, headless (shared/design/agent-clis.md, checked against @openai/codex 0.169.0):
//
//   codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
//     -m <model> [-i image…] [resume <thread_id>] -   <prompt.txt
//
// What must hold (runtimes/codex.test.ts unless named):
// 1. Never the default provider: `$CODEX_HOME/config.toml` (mode 600, rewritten every turn)
//    selects a provider entry of our own (`paddock`: Responses API over HTTP, no websockets,
//    no retries, key from OPENAI_API_KEY, base URL from OPENAI_BASE_URL when the sandbox env
//    has one), with update checks, analytics and plugins off. Codex's own default provider
//    without network hangs; ours fails at once. Test: "writes a config.toml that never uses
//    the default provider".
// 2. No OPENAI_API_KEY → the turn ends before Codex starts: exit 2 and one sentence on stderr.
//    Test: "fails fast without a credential" (runs the real wrapper script).
// 3. The prompt reaches Codex on stdin from the turn's prompt file (`-` argument): no shell
//    parses it and no 128 KiB single-argument limit applies. Resume is `exec … resume <id> -`.
// 4. Usage: Codex reports token totals per thread (cumulative across resumed turns) in
//    `turn.completed`. The session state it keeps (the thread's rollout file under
//    `$CODEX_HOME/sessions`, saved and restored with sessionPaths) records those totals too, so
//    the wrapper reads the thread's last totals from the rollout before and after the run and
//    prints one line `{"type":"paddock.usage","before":{…}|null,"after":{…}|null}`; parseLine
//    turns it into this turn's usage (after − before). `turn.completed` itself yields no usage
//    event. No rollout (Codex failed before writing one) → no usage. Tests: "reads real Codex
//    output into turn events", and the e2e test's second turn (agents.codex.e2e.test.ts).
// 5. A provider error Codex prints with an empty message (a 400 without a body, e.g. a gateway's
//    HTTP parser refusing the request) says the status and the URL instead: the wrapper
//    prints the URL Codex posts to (`{"type":"paddock.provider","url":"…/responses"}`,
//    origin and path of the base URL only) before Codex starts, and the adapter keeps it in the
//    turn's memory. Test: "an empty provider error says the status and the URL: the wrapper…".
import type { McpServer } from '../../../agents/agents.tables.ts';
import type { RuntimeAdapter, TurnCommand, TurnEvent } from '../../contracts.ts';
import type { TurnUsage } from '../../conversations.tables.ts';
import {
  emptyProviderError,
  HOME,
  jsonLine,
  modelId,
  noCredentialMessage,
  num,
  providerEndpoint,
  turnDir,
  turnFiles,
  WORKDIR,
} from './common.ts';
import { pinnedCli } from './pinned-cli.ts';

export const CODEX_HOME = `${HOME}/.codex`;
/** Codex's API base when the sandbox env names none (its own default for OpenAI). */
export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';
export const CODEX_NO_CREDENTIAL = noCredentialMessage('OpenAI', 'openai', 'OPENAI_API_KEY', 'codex');

/** TOML basic string (JSON's escapes are a subset TOML accepts for these characters). */
function tomlString(value: string): string {
  // JSON.stringify escapes ", \ and control characters as TOML basic strings do; U+007F and
  // the other characters TOML forbids unescaped are escaped by hand.
  return JSON.stringify(value).replace(/\u007f/g, '\\u007F');
}

function tomlKey(key: string): string {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : tomlString(key);
}

/** The config.toml of a turn (invariant 1). */
export function codexConfig(input: {
  model: string;
  baseUrl: string;
  system: string | null;
  mcpServers: Record<string, McpServer>;
}): string {
  const lines = [
    '# Written by Paddock before every turn; edits are overwritten.',
    `model = ${tomlString(input.model)}`,
    'model_provider = "paddock"',
    'approval_policy = "never"',
    'sandbox_mode = "danger-full-access"',
    'check_for_update_on_startup = false',
  ];
  if (input.system) lines.push(`developer_instructions = ${tomlString(input.system)}`);
  lines.push(
    '',
    '[model_providers.paddock]',
    'name = "OpenAI (Paddock)"',
    `base_url = ${tomlString(input.baseUrl)}`,
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
    'supports_websockets = false',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    'plugins = false',
  );
  for (const [name, server] of Object.entries(input.mcpServers)) {
    lines.push(
      '',
      `[mcp_servers.${tomlKey(name)}]`,
      `command = ${tomlString(server.command)}`,
      `args = [${server.args.map(tomlString).join(', ')}]`,
    );
    const env = Object.entries(server.env);
    if (env.length > 0)
      lines.push(`env = { ${env.map(([k, v]) => `${tomlKey(k)} = ${tomlString(v)}`).join(', ')} }`);
  }
  return `${lines.join('\n')}\n`;
}

/** The memory key under which the adapter keeps the URL the turn's wrapper printed (invariant 5). */
const PROVIDER_URL = 'provider_url';

/**
 * The turn file holding the line the wrapper prints before Codex starts,
 * `{"type":"paddock.provider","url":"http://…/responses"}` (providerEndpoint's form): the file sits
 * beside the prompt file, so the wrapper reads it as `${p%/*}/provider.json` with shell builtins
 * only (the URL never goes into argv). `providerLine` keeps that URL in the turn's memory.
 */
function providerFile(turnId: string, endpoint: string | null): TurnCommand['files'] {
  if (endpoint === null) return [];
  const line = JSON.stringify({ type: 'paddock.provider', url: endpoint });
  return [{ path: `${turnDir(turnId)}/provider.json`, content: `${line}\n`, mode: 0o600 }];
}

/** The wrapper's command printing the provider file's line (nothing when there is none). */
const PRINT_PROVIDER = `{ read -r l <"\${p%/*}/provider.json" && printf '%s\\n' "$l"; } 2>/dev/null`;

/** Keeps the URL of a `paddock.provider` line in the turn's memory; false for any other line. */
function providerLine(event: Record<string, unknown>, memory: Map<string, string>): boolean {
  if (event['type'] !== 'paddock.provider') return false;
  if (typeof event['url'] === 'string') memory.set(PROVIDER_URL, event['url']);
  return true;
}

/** The provider URL the turn's wrapper printed, if its line was read. */
function providerUrl(memory: Map<string, string>): string | undefined {
  return memory.get(PROVIDER_URL);
}

/**
 * The wrapper (invariants 2–5). Positional parameters: $1 prompt file, $2 the thread id to
 * resume ('' for a new thread), $3 the no-credential sentence, then Codex's argv. Codex runs
 * as a child (not exec'd) so the usage line can follow it; an interrupt signals the whole
 * process group, wrapper included.
 */
const WRAPPER = [
  '[ -n "$OPENAI_API_KEY" ] || { printf \'%s\\n\' "$3" >&2; exit 2; }',
  'p=$1; t=$2; shift 3',
  PRINT_PROVIDER,
  's="$CODEX_HOME/sessions"',
  // The thread's last totals, as the JSON object Codex wrote (numbers only), or nothing.
  'totals() { [ -n "$1" ] && [ -f "$1" ] && grep -o \'"total_token_usage":{[^}]*}\' "$1" | tail -n 1 | sed \'s/^"total_token_usage"://\'; }',
  // A resumed thread's rollout is named by its id; a new thread's is the newest file, once
  // there is one that was not the newest before the run.
  'newest() { ls -1t "$s"/*/*/*/rollout-*.jsonl 2>/dev/null | head -n 1; }',
  'before=; prev=',
  'if [ -n "$t" ]; then f=$(ls -1 "$s"/*/*/*/rollout-*-"$t".jsonl 2>/dev/null | head -n 1); before=$(totals "$f"); else prev=$(newest); fi',
  '"$@" <"$p"; rc=$?',
  'if [ -n "$t" ]; then after=$(totals "$f"); else f=$(newest); after=; [ "$f" = "$prev" ] || after=$(totals "$f"); fi',
  '[ -n "$before" ] || before=null',
  '[ -z "$after" ] || printf \'{"type":"paddock.usage","before":%s,"after":%s}\\n\' "$before" "$after"',
  'exit $rc',
].join('\n');

export const codexAdapter: RuntimeAdapter = {
  runtime: 'codex',
  cli: pinnedCli('codex'),
  sessionPaths: [`${CODEX_HOME}/sessions`],
  skillsDir: `${CODEX_HOME}/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, turnId, mcpServers, env }) {
    const files = turnFiles(turnId, prompt, images);
    const model = modelId(agent.model);
    const argv = [
      'codex',
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--dangerously-bypass-approvals-and-sandbox',
      '-m',
      model,
      ...files.imagePaths.flatMap((p) => ['-i', p]),
      ...(resumeSessionId ? ['resume', resumeSessionId] : []),
      '-',
    ];
    const baseUrl = env['OPENAI_BASE_URL'] || OPENAI_DEFAULT_BASE_URL;
    const config = codexConfig({ model, baseUrl, system: agent.system, mcpServers });
    return {
      argv: [
        'sh',
        '-c',
        WRAPPER,
        'paddock-codex',
        files.promptPath,
        resumeSessionId ?? '',
        CODEX_NO_CREDENTIAL,
        ...argv,
      ],
      env: { CODEX_HOME },
      cwd: WORKDIR,
      files: [
        { path: `${CODEX_HOME}/config.toml`, content: config, mode: 0o600 },
        ...files.files,
        ...providerFile(turnId, providerEndpoint(baseUrl, '/responses')),
      ],
    };
  },
  parseLine(line, memory = new Map()) {
    const event = jsonLine(line);
    if (!event) return line.trim() === '' ? [] : [{ kind: 'raw', line }];
    if (providerLine(event, memory)) return [];
    return codexEvents(event, memory) ?? [{ kind: 'raw', line }];
  },
};

type Json = Record<string, unknown>;
const isJson = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The events of one Codex JSON line; undefined when the line is not one this adapter knows. */
function codexEvents(event: Json, memory: Map<string, string>): TurnEvent[] | undefined {
  switch (event['type']) {
    case 'thread.started': {
      const id = str(event['thread_id']);
      return id ? [{ kind: 'session', session_id: id }] : undefined;
    }
    case 'turn.started':
    case 'turn.completed': // per-thread totals: this turn's share comes from paddock.usage
      return [];
    case 'turn.failed':
      // Codex prints the failure as an `error` line first, then again as the turn's end.
      return [];
    case 'error': {
      const message = str(event['message']);
      if (message === undefined) return undefined;
      // Codex prints a 400's body as the message, any other status as "unexpected status …, url:
      // …": an empty one is a 400 without a body (or with an empty error message).
      return [
        {
          kind: 'error',
          message: message.trim() === '' ? emptyProviderError(400, providerUrl(memory)) : message,
        },
      ];
    }
    case 'paddock.usage': {
      const usage = usageDelta(event['before'], event['after']);
      return usage ? [{ kind: 'usage', usage }] : [];
    }
    case 'item.started':
    case 'item.updated':
    case 'item.completed':
      return isJson(event['item']) ? itemEvents(String(event['type']), event['item']) : undefined;
    default:
      return undefined;
  }
}

/** One thread item: tool calls when they start, their results when they complete. */
function itemEvents(phase: string, item: Json): TurnEvent[] | undefined {
  const id = str(item['id']);
  const withId = id === undefined ? {} : { id };
  const completed = phase === 'item.completed';
  switch (item['type']) {
    case 'agent_message': {
      const text = str(item['text']);
      if (text === undefined) return undefined;
      return completed ? [{ kind: 'text', text }] : [];
    }
    case 'reasoning':
      // The model's reasoning summary: not assistant text; it stays in the raw stdout.
      return [];
    case 'command_execution': {
      if (phase === 'item.started')
        return [
          { kind: 'tool_call', ...withId, name: 'command_execution', input: { command: item['command'] } },
        ];
      if (!completed) return [];
      const exit = num(item['exit_code']);
      return [
        {
          kind: 'tool_result',
          ...withId,
          is_error: item['status'] === 'failed' || (exit !== undefined && exit !== 0),
          output: str(item['aggregated_output']) ?? '',
        },
      ];
    }
    case 'mcp_tool_call': {
      const name = `${str(item['server']) ?? 'mcp'}.${str(item['tool']) ?? 'tool'}`;
      if (phase === 'item.started')
        return [{ kind: 'tool_call', ...withId, name, input: item['arguments'] ?? null }];
      if (!completed) return [];
      const error = isJson(item['error']) ? str(item['error']['message']) : undefined;
      return [
        {
          kind: 'tool_result',
          ...withId,
          is_error: item['status'] === 'failed' || error !== undefined,
          output: error ?? JSON.stringify(item['result'] ?? null),
        },
      ];
    }
    case 'file_change': {
      // Reported once, when applied: the call and its result together.
      if (!completed) return [];
      const changes = Array.isArray(item['changes']) ? item['changes'] : [];
      const summary = changes
        .filter(isJson)
        .map((c) => `${str(c['kind']) ?? 'update'} ${str(c['path']) ?? ''}`)
        .join('\n');
      return [
        { kind: 'tool_call', ...withId, name: 'file_change', input: { changes } },
        { kind: 'tool_result', ...withId, is_error: item['status'] === 'failed', output: summary },
      ];
    }
    case 'web_search':
      return phase === 'item.started'
        ? [{ kind: 'tool_call', ...withId, name: 'web_search', input: { query: item['query'] } }]
        : [];
    case 'error': {
      const message = str(item['message']);
      return message === undefined ? undefined : completed ? [{ kind: 'error', message }] : [];
    }
    default:
      return undefined;
  }
}

/** This turn's usage from the thread totals before and after it (invariant 4). */
function usageDelta(before: unknown, after: unknown): TurnUsage | undefined {
  if (!isJson(after)) return undefined;
  const prior = isJson(before) ? before : {};
  const field = (key: string): number | undefined => {
    const a = num(after[key]);
    if (a === undefined) return undefined;
    return Math.max(0, a - (num(prior[key]) ?? 0));
  };
  const usage: TurnUsage = {};
  const input = field('input_tokens');
  const output = field('output_tokens');
  const cached = field('cached_input_tokens');
  if (input !== undefined) usage.input_tokens = input;
  if (output !== undefined) usage.output_tokens = output;
  if (cached !== undefined) usage.cache_read_tokens = cached;
  return Object.keys(usage).length > 0 ? usage : undefined;
}
