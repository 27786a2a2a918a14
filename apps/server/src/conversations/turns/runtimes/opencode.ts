// opencode, headless (shared/design/agent-clis.md, checked against opencode-ai 1.18.33):
//
//   opencode run --format json -m <provider>/<model> [--session <id>] [-f image…]   <prompt.txt
//
// What must hold (runtimes/opencode.test.ts unless named):
// 1. Never opencode's hosted provider: the config (OPENCODE_CONFIG_CONTENT) enables exactly one
//    provider, the one of the agent's model `<provider>/<model_id>` — anthropic → ANTHROPIC_*,
//    openai → OPENAI_*, google/gemini → GEMINI_* (+ GOOGLE_GEMINI_BASE_URL) — with the key read
//    by opencode from the env (`{env:NAME}`, never the value) and the model declared, so no
//    catalogue is needed. An OpenAI base URL in the sandbox env makes it an
//    `@ai-sdk/openai-compatible` provider (Chat Completions) under its own id, since opencode
//    drives its built-in `openai` id through the Responses API. Models fetch, auto-update and
//    sharing off. Test: "enables only the agent's provider, with the key by reference".
// 2. No key for that provider, or a provider outside those three → the turn ends before opencode
//    starts: exit 2 and one sentence on stderr (opencode would otherwise fall back to its
//    hosted provider and retry for ~69 s). Test: "fails fast without a credential".
// 3. Its own XDG dirs under the sandbox home; session state (XDG_DATA_HOME/opencode, a SQLite
//    database) is what sessionPaths saves, and resume (`--session`) needs only that and the same
//    working directory. Each run unpacks a ~5.5 MB library into TMPDIR: the wrapper gives it a
//    fresh TMPDIR and removes it when opencode ends.
// 4. The prompt reaches opencode on stdin from the turn's prompt file: no shell parses it and no
//    128 KiB single-argument limit applies.
// 5. Usage: opencode reports tokens per step (`step_finish`, one per model call); each becomes a
//    usage event and turn.ts adds them up. Cost only when non-zero (opencode reports 0 for a
//    model it has no price for). Test: "reads real opencode output into turn events".
// 6. An API error whose response had no body (opencode's message is then only the status text,
//    "Bad Request") says the status and the URL opencode reports with it (origin and path only).
//    Test: "an empty provider error says the status and the URL opencode reports".
import type { McpServer } from '../../../agents/agents.tables.ts';
import type { RuntimeAdapter, TurnEvent } from '../../contracts.ts';
import type { TurnUsage } from '../../conversations.tables.ts';
import {
  emptyProviderError,
  HOME,
  jsonLine,
  noCredentialMessage,
  num,
  providerEndpoint,
  turnFiles,
  WORKDIR,
} from './common.ts';
import { pinnedCli } from './pinned-cli.ts';

export const OPENCODE_CONFIG_DIR = `${HOME}/.config/opencode`;

/** Per provider family: the env names the key and base URL come from (agent-clis conventions). */
interface ProviderFamily {
  id: string;
  keyVar: string;
  baseUrlVar: string;
  /** What opencode's SDK wants after the base URL the env names (which follows each CLI's form). */
  apiPath: string;
  label: string;
  credentialPath: string;
}

const FAMILIES: Record<string, ProviderFamily> = {
  anthropic: {
    id: 'anthropic',
    keyVar: 'ANTHROPIC_API_KEY',
    baseUrlVar: 'ANTHROPIC_BASE_URL',
    apiPath: '/v1',
    label: 'Anthropic',
    credentialPath: 'anthropic',
  },
  openai: {
    id: 'openai',
    keyVar: 'OPENAI_API_KEY',
    baseUrlVar: 'OPENAI_BASE_URL',
    apiPath: '',
    label: 'OpenAI',
    credentialPath: 'openai',
  },
  google: {
    id: 'google',
    keyVar: 'GEMINI_API_KEY',
    baseUrlVar: 'GOOGLE_GEMINI_BASE_URL',
    apiPath: '/v1beta',
    label: 'Gemini',
    credentialPath: 'gemini',
  },
};
FAMILIES['gemini'] = FAMILIES['google'] as ProviderFamily;

/** The provider id opencode gets for an OpenAI-compatible endpoint (not its built-in `openai`). */
export const OPENAI_COMPATIBLE_ID = 'openai-compatible';

export interface OpencodeSetup {
  /** The `-m` value. */
  model: string;
  config: Record<string, unknown>;
  /** The env variable that must be set, and the sentence when it is not (invariant 2). */
  keyVar: string;
  missing: string;
}

/** The provider config of an agent's model (invariant 1); null for an unsupported provider. */
export function opencodeSetup(input: {
  model: string;
  env: Readonly<Record<string, string>>;
  system: string | null;
  mcpServers: Record<string, McpServer>;
}): OpencodeSetup | { unsupported: string } {
  const slash = input.model.indexOf('/');
  const providerName = slash === -1 ? '' : input.model.slice(0, slash);
  const modelName = slash === -1 ? input.model : input.model.slice(slash + 1);
  const family = FAMILIES[providerName.toLowerCase()];
  if (!family)
    return {
      unsupported: `paddock: opencode runs models of anthropic, openai or google (the agent's model is "${input.model}")`,
    };
  const baseUrl = (input.env[family.baseUrlVar] ?? '').replace(/\/+$/, '');
  const compatible = family.id === 'openai' && baseUrl !== '';
  const id = compatible ? OPENAI_COMPATIBLE_ID : family.id;
  const options: Record<string, unknown> = { apiKey: `{env:${family.keyVar}}` };
  if (baseUrl) options['baseURL'] = `${baseUrl}${family.apiPath}`;
  const provider: Record<string, unknown> = {
    ...(compatible ? { npm: '@ai-sdk/openai-compatible', name: 'OpenAI-compatible' } : {}),
    options,
    models: { [modelName]: { name: modelName } },
  };
  const model = `${id}/${modelName}`;
  const config: Record<string, unknown> = {
    $schema: 'https://opencode.ai/config.json',
    autoupdate: false,
    share: 'disabled',
    enabled_providers: [id],
    provider: { [id]: provider },
    model,
    // Session titles are written by the "small" model: the same one, never a default elsewhere.
    small_model: model,
    // The sandbox is the boundary: no permission prompt (a headless run cannot answer one).
    permission: { '*': 'allow' },
  };
  if (input.system) config['instructions'] = [`${OPENCODE_CONFIG_DIR}/paddock-system.md`];
  const mcp = Object.entries(input.mcpServers);
  if (mcp.length > 0)
    config['mcp'] = Object.fromEntries(
      mcp.map(([name, server]) => [
        name,
        { type: 'local', command: [server.command, ...server.args], environment: server.env, enabled: true },
      ]),
    );
  return {
    model,
    config,
    keyVar: family.keyVar,
    missing: noCredentialMessage(family.label, family.credentialPath, family.keyVar, 'opencode'),
  };
}

/**
 * The wrapper (invariants 2–4). Positional parameters: $1 prompt file, $2 the sentence when the
 * credential is missing or the provider unsupported, then opencode's argv. `keyVar` is one of
 * this file's constants (never input), null when the provider is unsupported.
 */
function wrapper(keyVar: string | null): string {
  return [
    keyVar === null
      ? 'printf \'%s\\n\' "$2" >&2; exit 2'
      : `[ -n "\${${keyVar}:-}" ] || { printf '%s\\n' "$2" >&2; exit 2; }`,
    'p=$1; shift 2',
    'TMPDIR=$(mktemp -d) || exit 1; export TMPDIR',
    'trap \'rm -rf "$TMPDIR"\' EXIT',
    "trap 'exit 143' TERM",
    "trap 'exit 130' INT",
    '"$@" <"$p"',
  ].join('\n');
}

export const opencodeAdapter: RuntimeAdapter = {
  runtime: 'opencode',
  cli: pinnedCli('opencode'),
  sessionPaths: [`${HOME}/.local/share/opencode`],
  skillsDir: `${OPENCODE_CONFIG_DIR}/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, turnId, mcpServers, env }) {
    const files = turnFiles(turnId, prompt, images);
    const setup = opencodeSetup({ model: agent.model, env, system: agent.system, mcpServers });
    const supported = 'config' in setup;
    const argv = [
      'opencode',
      'run',
      '--format',
      'json',
      '-m',
      supported ? setup.model : agent.model,
      ...(resumeSessionId ? ['--session', resumeSessionId] : []),
      ...files.imagePaths.flatMap((p) => ['-f', p]),
    ];
    const extra =
      supported && agent.system
        ? [{ path: `${OPENCODE_CONFIG_DIR}/paddock-system.md`, content: agent.system, mode: 0o600 }]
        : [];
    return {
      argv: [
        'sh',
        '-c',
        wrapper(supported ? setup.keyVar : null),
        'paddock-opencode',
        files.promptPath,
        supported ? setup.missing : setup.unsupported,
        ...argv,
      ],
      env: {
        ...(supported ? { OPENCODE_CONFIG_CONTENT: JSON.stringify(setup.config) } : {}),
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_SHARE: '1',
        XDG_CONFIG_HOME: `${HOME}/.config`,
        XDG_DATA_HOME: `${HOME}/.local/share`,
        XDG_CACHE_HOME: `${HOME}/.cache`,
        XDG_STATE_HOME: `${HOME}/.local/state`,
      },
      cwd: WORKDIR,
      files: [...extra, ...files.files],
    };
  },
  parseLine(line) {
    const event = jsonLine(line);
    if (!event) return line.trim() === '' ? [] : [{ kind: 'raw', line }];
    return opencodeEvents(event) ?? [{ kind: 'raw', line }];
  },
};

type Json = Record<string, unknown>;
const isJson = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The events of one opencode JSON line; undefined when the line is not one this adapter knows. */
function opencodeEvents(event: Json): TurnEvent[] | undefined {
  const part = isJson(event['part']) ? event['part'] : {};
  const sessionId = str(event['sessionID']);
  const session: TurnEvent[] = sessionId ? [{ kind: 'session', session_id: sessionId }] : [];
  switch (event['type']) {
    case 'step_start':
      // Every step names the session: a turn that fails after its first step still reports it.
      return session;
    case 'text': {
      const text = str(part['text']);
      return text === undefined ? undefined : [{ kind: 'text', text }];
    }
    case 'reasoning':
      // Thinking blocks (only with --thinking): not assistant text; they stay in the raw stdout.
      return [];
    case 'tool_use':
      return toolEvents(part);
    case 'step_finish': {
      const usage = stepUsage(part);
      return usage ? [{ kind: 'usage', usage }] : [];
    }
    case 'error': {
      const error = isJson(event['error']) ? event['error'] : {};
      const data = isJson(error['data']) ? error['data'] : {};
      const message = str(data['message']) ?? str(error['name']) ?? 'opencode reported an error';
      return [...session, { kind: 'error', message: apiErrorMessage(data) ?? message }];
    }
    default:
      return undefined;
  }
}

/**
 * An API error whose response had no body: opencode's message is then only the status text
 * ("Bad Request"); it says the status and the URL instead (invariant 6). Undefined otherwise.
 */
function apiErrorMessage(data: Json): string | undefined {
  const status = num(data['statusCode']);
  const body = data['responseBody'];
  if (status === undefined || (typeof body === 'string' && body.trim() !== '')) return undefined;
  const metadata = isJson(data['metadata']) ? data['metadata'] : {};
  const url = str(metadata['url']);
  return emptyProviderError(status, (url && providerEndpoint(url, '')) ?? undefined);
}

/** A tool part: opencode prints it once it has finished, so the call and its result together. */
function toolEvents(part: Json): TurnEvent[] | undefined {
  const name = str(part['tool']);
  const state = isJson(part['state']) ? part['state'] : undefined;
  if (!name || !state) return undefined;
  const id = str(part['callID']);
  const withId = id === undefined ? {} : { id };
  const events: TurnEvent[] = [{ kind: 'tool_call', ...withId, name, input: state['input'] ?? null }];
  const status = state['status'];
  if (status === 'completed' || status === 'error') {
    const metadata = isJson(state['metadata']) ? state['metadata'] : {};
    const exit = num(metadata['exit']);
    events.push({
      kind: 'tool_result',
      ...withId,
      is_error: status === 'error' || (exit !== undefined && exit !== 0),
      output: str(state['output']) ?? str(state['error']) ?? '',
    });
  }
  return events;
}

/** One step's tokens (invariant 5). */
function stepUsage(part: Json): TurnUsage | undefined {
  const tokens = isJson(part['tokens']) ? part['tokens'] : {};
  const cache = isJson(tokens['cache']) ? tokens['cache'] : {};
  const usage: TurnUsage = {};
  const input = num(tokens['input']);
  const output = num(tokens['output']);
  const cached = num(cache['read']);
  const cost = num(part['cost']);
  if (input !== undefined) usage.input_tokens = input;
  if (output !== undefined) usage.output_tokens = output;
  if (cached !== undefined) usage.cache_read_tokens = cached;
  if (cost !== undefined && cost > 0) usage.cost_usd = cost;
  return Object.keys(usage).length > 0 ? usage : undefined;
}
