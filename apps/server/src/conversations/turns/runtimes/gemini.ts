// Gemini CLI, headless (shared/design/agent-clis.md, docs/agents.md):
//   gemini -p '' --output-format stream-json -m <id> --approval-mode yolo [--resume <uuid>]  < prompt.txt
//
// - The prompt comes on stdin from a file (`-p` is appended to stdin, so an empty `-p` makes the
//   file the whole prompt: no argument limit, no shell parsing); images are `@path` references.
// - ~/.gemini/settings.json (mode 600, rewritten every turn): API-key auth, the agent's MCP
//   servers (`${VAR}` already substituted, so secrets stay out of argv), usage statistics,
//   telemetry, auto-update and terminal-compatibility warnings off. GEMINI_CLI_TRUST_WORKSPACE
//   trusts the working directory, GEMINI_CLI_NO_RELAUNCH keeps it one process; --approval-mode
//   yolo: no permission prompts (the CLI says so on stderr, "YOLO mode is enabled", whatever the
//   settings).
// - The system prompt is the global context file ~/.gemini/GEMINI.md, which the CLI appends to
//   its own system instruction (GEMINI_SYSTEM_MD would replace the instruction, tools and all).
// - No login, ever: without GEMINI_API_KEY the wrapper fails the turn before the CLI starts.
//   GOOGLE_GEMINI_BASE_URL (a gateway) is read by the CLI from the sandbox env.
// - Resume: `--resume <session_id>` from the same working directory; chats live under
//   ~/.gemini/tmp/<project>/chats, found through ~/.gemini/projects.json: both are sessionPaths.
//
// stream-json lines → TurnEvents: init → session; assistant message (deltas) → text; tool_use →
// tool_call; tool_result → tool_result; error → error; result → usage (per invocation) and
// error when its status is `error`. The user message (the prompt echoed) → nothing; lines of
// another type, or not JSON, → raw. An API error without a message (a response without a body,
// which the CLI prints as `[API Error: {"error":{"message":"","code":400,…}}]`) says the status
// in words. Test: "an API error without a message says the status".
import type { RuntimeAdapter, TurnEvent } from '../../contracts.ts';
import {
  defined,
  emptyProviderError,
  HOME,
  jsonLine,
  mcpServersJson,
  modelId,
  noCredentialMessage,
  num,
  stdinArgv,
  turnFiles,
  WORKDIR,
} from './common.ts';
import { pinnedCli } from './pinned-cli.ts';

const CREDENTIAL = {
  vars: ['GEMINI_API_KEY'],
  message: noCredentialMessage('Gemini', 'gemini', 'GEMINI_API_KEY'),
};

export const GEMINI_SETTINGS_PATH = `${HOME}/.gemini/settings.json`;
export const GEMINI_CONTEXT_PATH = `${HOME}/.gemini/GEMINI.md`;

export const geminiAdapter: RuntimeAdapter = {
  runtime: 'gemini',
  cli: pinnedCli('gemini'),
  sessionPaths: [`${HOME}/.gemini/tmp`, `${HOME}/.gemini/projects.json`, `${HOME}/.gemini/history`],
  skillsDir: `${HOME}/.gemini/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, mcpServers, turnId }) {
    const paths = turnFiles(turnId, '', images).imagePaths;
    const text = paths.length === 0 ? prompt : `${prompt}\n\n${paths.map((p) => `@${p}`).join(' ')}`;
    const files = turnFiles(turnId, text, images);
    const settings = {
      security: { auth: { selectedType: 'gemini-api-key' } },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      // No terminal-compatibility warnings ("256-color support not detected") on stderr: no
      // terminal runs a headless turn, and the warning read as the agent's output.
      ui: { showCompatibilityWarnings: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      mcpServers: mcpServersJson(mcpServers),
    };
    files.files.push(
      { path: GEMINI_SETTINGS_PATH, content: `${JSON.stringify(settings, null, 2)}\n`, mode: 0o600 },
      // Written every turn (empty without a system prompt), so a removed prompt does not linger.
      { path: GEMINI_CONTEXT_PATH, content: agent.system ?? '', mode: 0o600 },
    );
    const argv = [
      'gemini',
      '-p',
      '',
      '--output-format',
      'stream-json',
      '-m',
      modelId(agent.model),
      '--approval-mode',
      'yolo',
    ];
    if (resumeSessionId) argv.push('--resume', resumeSessionId);
    return {
      argv: stdinArgv('gemini', argv, files.promptPath, CREDENTIAL),
      env: { GEMINI_CLI_TRUST_WORKSPACE: 'true', GEMINI_CLI_NO_RELAUNCH: 'true' },
      cwd: WORKDIR,
      files: files.files,
    };
  },
  parseLine(line) {
    if (line.trim() === '') return [];
    const event = jsonLine(line);
    if (!event) return [{ kind: 'raw', line }];
    switch (event['type']) {
      case 'init':
        return typeof event['session_id'] === 'string'
          ? [{ kind: 'session', session_id: event['session_id'] }]
          : [];
      case 'message':
        return event['role'] === 'assistant' &&
          typeof event['content'] === 'string' &&
          event['content'] !== ''
          ? [{ kind: 'text', text: event['content'] }]
          : [];
      case 'tool_use':
        return typeof event['tool_name'] === 'string'
          ? [
              {
                kind: 'tool_call',
                ...(typeof event['tool_id'] === 'string' ? { id: event['tool_id'] } : {}),
                name: event['tool_name'],
                input: event['parameters'] ?? {},
              },
            ]
          : [{ kind: 'raw', line }];
      case 'tool_result':
        return [toolResult(event)];
      case 'error':
        return [{ kind: 'error', message: errorMessage(event) ?? 'the Gemini CLI reported an error' }];
      case 'result':
        return resultEvents(event);
      default:
        return [{ kind: 'raw', line }];
    }
  },
};

type Json = Record<string, unknown>;

function messageOf(event: Json): string | undefined {
  if (typeof event['message'] === 'string') return event['message'];
  const error = event['error'];
  if (error && typeof error === 'object' && typeof (error as Json)['message'] === 'string')
    return (error as Json)['message'] as string;
  return undefined;
}

function toolResult(event: Json): TurnEvent {
  const ok = event['status'] === 'success';
  const output = typeof event['output'] === 'string' ? event['output'] : ok ? '' : (messageOf(event) ?? '');
  return {
    kind: 'tool_result',
    ...(typeof event['tool_id'] === 'string' ? { id: event['tool_id'] } : {}),
    is_error: !ok,
    output,
  };
}

/**
 * The message of an error line. An API error the CLI prints as `[API Error: {"error":{"message":"",
 * "code":400,…}}]` (a response without a body) says the status in words instead.
 */
function errorMessage(event: Json): string | undefined {
  const message = messageOf(event);
  const api = message === undefined ? null : /^\[API Error: (\{.*\})\]$/s.exec(message.trim());
  if (!api) return message;
  const error = jsonLine(api[1] ?? '')?.['error'];
  if (!error || typeof error !== 'object') return message;
  const text = (error as Json)['message'];
  if (typeof text !== 'string' || text.trim() !== '') return message;
  return emptyProviderError(num((error as Json)['code']), undefined);
}

function resultEvents(event: Json): TurnEvent[] {
  const out: TurnEvent[] = [];
  const stats = (event['stats'] ?? {}) as Json;
  const reported = defined({
    input_tokens: num(stats['input_tokens']),
    output_tokens: num(stats['output_tokens']),
    cache_read_tokens: num(stats['cached']),
  });
  if (reported) out.push({ kind: 'usage', usage: reported });
  if (event['status'] === 'error')
    out.push({
      kind: 'error',
      message: errorMessage(event) ?? 'the Gemini CLI ended the turn with an error',
    });
  return out;
}
