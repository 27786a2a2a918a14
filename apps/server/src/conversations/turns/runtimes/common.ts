// What the four runtime adapters share: where a turn's files go, how the prompt reaches the
// CLI without putting it in a process argument the shell could misread, and JSON line parsing.
// The prompt and images are written as files (mode 600) before the exec; the argv reads the
// prompt with "$(cat file)" inside `sh -c`, so no prompt text is ever parsed by a shell.
import { STATUS_CODES } from 'node:http';
import type { McpServer } from '../../../agents/agents.tables.ts';
import type { TurnEvent, TurnImage } from '../../contracts.ts';
import type { TurnUsage } from '../../conversations.tables.ts';

export const HOME = '/home/sandbox';
export const WORKDIR = HOME;
const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
};

export function turnDir(turnId: string): string {
  return `${HOME}/.paddock/turns/${turnId}`;
}

export interface TurnFiles {
  promptPath: string;
  imagePaths: string[];
  files: { path: string; content: Buffer | string; mode?: number }[];
}

export function turnFiles(turnId: string, prompt: string, images: TurnImage[]): TurnFiles {
  const dir = turnDir(turnId);
  const promptPath = `${dir}/prompt.txt`;
  const imagePaths = images.map(
    (image, i) => `${dir}/image-${i + 1}.${EXTENSIONS[image.mediaType] ?? 'bin'}`,
  );
  return {
    promptPath,
    imagePaths,
    files: [
      { path: promptPath, content: prompt, mode: 0o600 },
      ...images.map((image, i) => ({ path: imagePaths[i] ?? '', content: image.data, mode: 0o600 })),
    ],
  };
}

/**
 * `sh -c 'exec <cli> … "$(cat "$1")" …' paddock-<name> <promptPath> <rest…>`: the prompt
 * file's content becomes one argument; `rest` is appended after it, quoted by position.
 */
export function shellArgv(name: string, before: string[], promptPath: string, after: string[]): string[] {
  const quote = (i: number) => `"$${i}"`;
  const head = before.map((_, i) => quote(i + 2));
  const tail = after.map((_, i) => quote(i + 2 + before.length));
  const script = `exec ${[...head, '"$(cat "$1")"', ...tail].join(' ')} </dev/null`;
  return ['sh', '-c', script, `paddock-${name}`, promptPath, ...before, ...after];
}

/** The model id of an agent's `<provider>/<model_id>`. */
export function modelId(model: string): string {
  const i = model.indexOf('/');
  return i === -1 ? model : model.slice(i + 1);
}

export function jsonLine(line: string): Record<string, unknown> | null {
  const text = line.trim();
  if (!text.startsWith('{')) return null;
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

export function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** Drops undefined entries (usage fields a runtime did not report). */
export function defined(usage: Record<string, number | undefined>): Record<string, number> | undefined {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(usage)) if (v !== undefined) out[k] = v;
  return Object.keys(out).length > 0 ? out : undefined;
}

export type Summary = { sessionId?: string; usage?: TurnUsage } | null;

/** A line's session id and usage as common turn events. */
export function toEvents(summary: Summary): TurnEvent[] {
  const events: TurnEvent[] = [];
  if (summary?.sessionId) events.push({ kind: 'session', session_id: summary.sessionId });
  if (summary?.usage) events.push({ kind: 'usage', usage: summary.usage });
  return events;
}

/**
 * The sentence a turn prints when its CLI has no credential: every way to set one (the CLI, the
 * console, the API, a secret), so a person who reads it on a terminal knows the next step.
 */
export function noCredentialMessage(label: string, provider: string, keyVar: string, cli?: string): string {
  return (
    `paddock: no ${label} credential${cli ? ` for ${cli}` : ''}: set one with \`paddock credentials set ${provider}\`, ` +
    `the console's Account page or PUT /api/account/inference-credentials/${provider}, ` +
    `or a secret ${keyVar} in the agent's environment or vault`
  );
}

/** A credential the CLI needs: any one of `vars` set, or the turn fails at once with `message`. */
export interface CredentialCheck {
  vars: string[];
  message: string;
}

/**
 * `sh -c '<check>; exec "$@" <"$1"' paddock-<name> <promptPath> <argv…>`: the CLI reads the prompt
 * from stdin (a file), so no prompt ever meets the 128 KiB limit of one argument, nor a shell
 * parser. Before the exec, a missing credential ends the turn with exit 2 and a sentence on stderr
 * (never an interactive login, never a hang). The variable names are the adapter's constants; the
 * message travels as an argument.
 */
export function stdinArgv(
  name: string,
  argv: string[],
  promptPath: string,
  credential?: CredentialCheck,
): string[] {
  const check = credential
    ? `[ -n "${credential.vars.map((v) => `\${${v}:-}`).join('')}" ] || { printf '%s\\n' "$2" >&2; exit 2; }; `
    : '';
  const script = `${check}p=$1; shift 2; exec "$@" <"$p"`;
  return ['sh', '-c', script, `paddock-${name}`, promptPath, credential?.message ?? '', ...argv];
}

/** The agent's MCP servers in the `{command, args, env}` form claude and gemini both read. */
export function mcpServersJson(servers: Record<string, McpServer>): Record<string, McpServer> {
  const out: Record<string, McpServer> = {};
  for (const [name, server] of Object.entries(servers))
    out[name] = { command: server.command, args: server.args, env: server.env };
  return out;
}

/**
 * The provider endpoint a turn's CLI calls, as a turn may print it: origin and path only (userinfo,
 * query and fragment may carry a key). Null when `base` is no URL.
 */
export function providerEndpoint(base: string, path: string): string | null {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    return null;
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}${path}`;
}

/**
 * What a provider error without a message says instead (issue 37 finding 9): the status and the
 * URL that got it. A bare `400 Bad Request` (a gateway's HTTP parser refusing a request, say) is
 * printed by the CLIs as an empty message (Codex), the status text (opencode) or an empty JSON
 * error (Gemini), which tells a person neither what failed nor where.
 */
export function emptyProviderError(status: number | undefined, url: string | undefined): string {
  const text = status === undefined ? undefined : STATUS_CODES[status];
  const code = status === undefined ? 'an error' : `HTTP ${status}${text ? ` ${text}` : ''}`;
  return `the provider answered ${code} without an error message${url ? ` (${url})` : ''}`;
}
