// Claude Code, headless (shared/design/agent-clis.md, docs/agents.md):
//   claude -p --output-format stream-json --verbose --dangerously-skip-permissions --model <id>
//     [--append-system-prompt-file <f>] [--mcp-config=<f>] [--resume <session>]  < prompt.txt
//
// - The prompt comes on stdin from a file (no argument limit, no shell parsing); images are
//   files whose paths the prompt lists (Claude reads them with its Read tool).
// - Permission prompts off: the sandbox is the boundary. As root the skip flag is refused unless
//   IS_SANDBOX=1, so it is always set.
// - No login, ever: without ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / CLAUDE_CODE_OAUTH_TOKEN the
//   wrapper fails the turn before the CLI starts. ANTHROPIC_BASE_URL (a gateway) is read by the CLI
//   from the sandbox env; nothing secret is put in argv or in a file other than mode 600.
// - Telemetry, error reporting, auto-update and other non-essential traffic off.
// - Resume: `--resume <session_id>` from the same working directory (/home/sandbox); the session
//   transcripts live under ~/.claude/projects, which is what sessionPaths carries across sandboxes.
//
// stream-json lines → TurnEvents: system/init → session; system/api_retry (the CLI retrying a
// failed model request, up to minutes in all) → error, one per attempt, so a person watching sees
// why nothing happens; assistant text → text, tool_use →
// tool_call; user tool_result → tool_result; an assistant message flagged `error` (the CLI's own
// "Not logged in", API errors) → error, with the next step for the two a person cannot read
// alone: "Failed to authenticate" on the egress proxy's 403 is a network refusal (the key was
// never checked; sandboxd's wording, @paddock/sandbox-client/egress-refusals), any other
// authentication failure a refused credential; result → session and usage (this turn's: `usage` is per
// invocation, cost from model_usage_since_last_result since total_cost_usd is the session's), and
// error for the error subtypes. Lines of another type, or not JSON, → raw.
import { EGRESS_DENIED, EGRESS_NOT_PUBLIC } from '@paddock/sandbox-client/egress-refusals';
import type { RuntimeAdapter, TurnEvent } from '../../contracts.ts';
import {
  defined,
  HOME,
  jsonLine,
  mcpServersJson,
  modelId,
  noCredentialMessage,
  num,
  stdinArgv,
  turnDir,
  turnFiles,
  WORKDIR,
} from './common.ts';
import { pinnedCli } from './pinned-cli.ts';

const CREDENTIAL = {
  vars: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN'],
  message: noCredentialMessage('Anthropic', 'anthropic', 'ANTHROPIC_API_KEY'),
};

export const claudeAdapter: RuntimeAdapter = {
  runtime: 'claude',
  cli: pinnedCli('claude'),
  sessionPaths: [`${HOME}/.claude/projects`],
  skillsDir: `${HOME}/.claude/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, mcpServers, turnId }) {
    const dir = turnDir(turnId);
    const withImages =
      images.length === 0
        ? prompt
        : `${prompt}\n\nAttached images:\n${turnFiles(turnId, '', images).imagePaths.join('\n')}`;
    const files = turnFiles(turnId, withImages, images);
    const argv = [
      'claude',
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
      '--model',
      modelId(agent.model),
    ];
    if (agent.system) {
      const path = `${dir}/system.md`;
      files.files.push({ path, content: agent.system, mode: 0o600 });
      argv.push('--append-system-prompt-file', path);
    }
    if (Object.keys(mcpServers).length > 0) {
      // The values may hold secrets (${VAR} substituted): a mode-600 file, never argv.
      const path = `${dir}/mcp.json`;
      files.files.push({
        path,
        content: JSON.stringify({ mcpServers: mcpServersJson(mcpServers) }),
        mode: 0o600,
      });
      argv.push(`--mcp-config=${path}`);
    }
    if (resumeSessionId) argv.push('--resume', resumeSessionId);
    return {
      argv: stdinArgv('claude', argv, files.promptPath, CREDENTIAL),
      env: {
        IS_SANDBOX: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
      },
      cwd: WORKDIR,
      files: files.files,
    };
  },
  parseLine(line) {
    if (line.trim() === '') return [];
    const event = jsonLine(line);
    if (!event) return [{ kind: 'raw', line }];
    switch (event['type']) {
      case 'system':
        if (event['subtype'] === 'init' && typeof event['session_id'] === 'string')
          return [{ kind: 'session', session_id: event['session_id'] }];
        return event['subtype'] === 'api_retry' ? [retryEvent(event)] : [];
      case 'assistant':
        return assistantEvents(event);
      case 'user':
        return toolResults(event);
      case 'result':
        return resultEvents(event);
      default:
        return [{ kind: 'raw', line }];
    }
  },
};

type Json = Record<string, unknown>;

/** `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":619,…}` */
function retryEvent(event: Json): TurnEvent {
  const attempt = num(event['attempt']);
  const max = num(event['max_retries']);
  const delay = num(event['retry_delay_ms']);
  const status = num(event['error_status']);
  const error = typeof event['error'] === 'string' && event['error'] !== 'unknown' ? event['error'] : '';
  const why = status !== undefined ? `HTTP ${status}${error ? `, ${error}` : ''}` : error || 'no answer';
  const when = delay !== undefined ? ` in ${(delay / 1000).toFixed(1)} s` : '';
  const which = attempt !== undefined ? ` (attempt ${attempt}${max !== undefined ? ` of ${max}` : ''})` : '';
  return { kind: 'error', message: `the model API request failed (${why}); retrying${when}${which}` };
}

function blocks(event: Json): Json[] {
  const message = (event['message'] ?? {}) as Json;
  const content = message['content'];
  return Array.isArray(content) ? (content.filter((b) => b && typeof b === 'object') as Json[]) : [];
}

function assistantEvents(event: Json): TurnEvent[] {
  const parts = blocks(event);
  if (typeof event['error'] === 'string') {
    const text = parts
      .map((b) => (typeof b['text'] === 'string' ? b['text'] : ''))
      .join('')
      .trim();
    return [{ kind: 'error', message: assistantError(event['error'], text || event['error']) }];
  }
  const out: TurnEvent[] = [];
  for (const block of parts) {
    if (block['type'] === 'text' && typeof block['text'] === 'string' && block['text'] !== '')
      out.push({ kind: 'text', text: block['text'] });
    else if (block['type'] === 'tool_use' && typeof block['name'] === 'string')
      out.push({
        kind: 'tool_call',
        ...(typeof block['id'] === 'string' ? { id: block['id'] } : {}),
        name: block['name'],
        input: block['input'] ?? {},
      });
  }
  return out;
}

/**
 * The CLI's message for an assistant error, with the next step where its words mislead: the
 * proxy's refusal reads "Failed to authenticate. API Error: 403 egress to … is denied by the
 * sandbox network policy" (captured from claude 2.1.330 against sandboxd's answer).
 */
function assistantError(kind: string, text: string): string {
  if (EGRESS_DENIED.test(text))
    return `the sandbox network policy refused the model API's host, so no key was checked (Claude Code says: ${text}): add that host to the environment's networking_config.allowed_hosts, or set networking_type to unrestricted`;
  if (EGRESS_NOT_PUBLIC.test(text))
    return `sandboxd refused the model API's host: it resolves to a private or loopback address, so no key was checked (Claude Code says: ${text}): the operator opens a private range with SANDBOXD_EGRESS_ALLOW_CIDRS (docs/sandboxd.md)`;
  if (kind === 'authentication_failed')
    return `${text}: the provider refused the Anthropic credential; replace it with \`paddock credentials set anthropic\` or on the console's Account page, or fix the ANTHROPIC_API_KEY secret that sets it`;
  return text;
}

/** A tool result's content: a string, or text blocks (images and other blocks are named). */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: unknown) => {
      const p = (part ?? {}) as Json;
      return typeof p['text'] === 'string' ? p['text'] : `[${String(p['type'] ?? 'content')}]`;
    })
    .join('\n');
}

function toolResults(event: Json): TurnEvent[] {
  const out: TurnEvent[] = [];
  for (const block of blocks(event)) {
    if (block['type'] !== 'tool_result') continue;
    out.push({
      kind: 'tool_result',
      ...(typeof block['tool_use_id'] === 'string' ? { id: block['tool_use_id'] } : {}),
      is_error: block['is_error'] === true,
      output: resultText(block['content']),
    });
  }
  return out;
}

function resultEvents(event: Json): TurnEvent[] {
  const out: TurnEvent[] = [];
  if (typeof event['session_id'] === 'string') out.push({ kind: 'session', session_id: event['session_id'] });
  const usage = (event['usage'] ?? {}) as Json;
  // total_cost_usd is the whole session's; the turn's cost is the sum over the models it used.
  const since = event['model_usage_since_last_result'];
  let cost = num(event['total_cost_usd']);
  if (since && typeof since === 'object') {
    const costs = Object.values(since as Record<string, Json>).map((m) => num(m?.['costUSD']) ?? 0);
    cost = costs.reduce((a, b) => a + b, 0);
  }
  const reported = defined({
    input_tokens: num(usage['input_tokens']),
    output_tokens: num(usage['output_tokens']),
    cache_read_tokens: num(usage['cache_read_input_tokens']),
    cost_usd: cost,
  });
  if (reported) out.push({ kind: 'usage', usage: reported });
  // A failure the CLI reported in an assistant message (subtype `success`, is_error) was already
  // an error event; the error subtypes (error_max_turns, error_during_execution) were not.
  if (event['is_error'] === true && String(event['subtype'] ?? '').startsWith('error')) {
    const message =
      typeof event['result'] === 'string' && event['result'] !== ''
        ? event['result']
        : `the turn ended with ${String(event['subtype'] ?? 'an error')}`;
    out.push({ kind: 'error', message });
  }
  return out;
}
