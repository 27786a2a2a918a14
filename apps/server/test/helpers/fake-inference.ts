// A fake inference provider for the agent tests: @copilotkit/aimock on loopback, speaking the real
// streaming wire formats the four CLIs use (Anthropic Messages, OpenAI Responses and Chat
// Completions, Gemini streamGenerateContent), scripted per test.
//
//   const fake = await startFakeInference();              // before sandboxd: it needs fake.serviceRoute
//   startTestSandboxd({ env: { SANDBOXD_SERVICE_ROUTES: fake.serviceRoute } });
//   fake.script('claude', { marker: 'EDIT-1', command: 'echo hi > a.txt', reply: 'Done.' });
//   // a prompt containing EDIT-1 → the CLI is asked to run the command with its own shell
//   // tool, then, once it sends the tool's result, gets the final message (with usage).
//   fake.requests().some((r) => r.text.includes('EDIT-1'));  // what the CLI sent (resume checks)
//
// Reached from inside a sandbox as `fake.sandboxUrl` (http://inference.test:<port>): sandboxd's
// egress proxy routes that exact name and port to the loopback listener (SANDBOXD_SERVICE_ROUTES).
// The server is unref'd: it never keeps a test process alive, and close() (or the end of the
// process) stops it.
import { createServer, type Fixture, type JournalEntry, normalizeResponse } from '@copilotkit/aimock';
import type { Runtime } from '../../src/agents/agents.tables.ts';

/** The host name a sandbox uses for the fake (mapped by the egress proxy, never by DNS). */
export const FAKE_INFERENCE_HOST = 'inference.test';

/** Each CLI's own shell tool: its name and the arguments that run one command. */
export const SHELL_TOOLS: Record<Runtime, { name: string; args(command: string): Record<string, unknown> }> =
  {
    claude: { name: 'Bash', args: (command) => ({ command, description: 'Run the command' }) },
    gemini: { name: 'run_shell_command', args: (command) => ({ command }) },
    codex: { name: 'exec_command', args: (command) => ({ cmd: command }) },
    opencode: { name: 'bash', args: (command) => ({ command, description: 'Run the command' }) },
  };

export interface ScriptedTurn {
  /** A word of the prompt that selects this script (unique per test). */
  marker: string;
  /** A shell command the fake first asks the CLI to run with its shell tool (omitted: answers at once). */
  command?: string;
  /** The final assistant message. */
  reply: string;
  /** Token counts the final message reports. */
  usage?: { input: number; output: number };
}

export interface FakeRequest {
  path: string;
  /** The request's messages as aimock normalised them (chat form: role + content). */
  messages: { role: string; content: unknown }[];
  /** Every message's text, joined: to look for what a CLI sent (earlier turns on resume). */
  text: string;
  status: number;
}

export interface FakeInference {
  /** http://127.0.0.1:<port>, for a CLI run on the host. */
  url: string;
  port: number;
  /** http://inference.test:<port>, for a CLI in a sandbox. */
  sandboxUrl: string;
  /** `inference.test=127.0.0.1:<port>`, an entry of SANDBOXD_SERVICE_ROUTES. */
  serviceRoute: string;
  /** Adds a scripted turn: a shell tool call (if `command`), then the final message. */
  script(runtime: Runtime, turn: ScriptedTurn): void;
  /** The requests the fake has answered, oldest first. */
  requests(): FakeRequest[];
  clearRequests(): void;
  close(): Promise<void>;
}

/** The usage object in the field names the runtime's wire format uses. */
function usageFor(runtime: Runtime, usage: { input: number; output: number }): Record<string, number> {
  if (runtime === 'gemini') return { promptTokenCount: usage.input, candidatesTokenCount: usage.output };
  if (runtime === 'opencode') return { prompt_tokens: usage.input, completion_tokens: usage.output };
  return { input_tokens: usage.input, output_tokens: usage.output };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map(textOf).join('\n');
  if (content && typeof content === 'object') {
    const part = content as Record<string, unknown>;
    return typeof part['text'] === 'string' ? part['text'] : JSON.stringify(part);
  }
  return '';
}

function toRequest(entry: JournalEntry): FakeRequest {
  const body = (entry.body ?? {}) as { messages?: unknown };
  const messages = Array.isArray(body.messages)
    ? (body.messages as { role?: unknown; content?: unknown }[]).map((m) => ({
        role: String(m.role ?? ''),
        content: m.content,
      }))
    : [];
  return {
    path: entry.path,
    messages,
    text: messages.map((m) => textOf(m.content)).join('\n'),
    status: entry.response.status,
  };
}

export async function startFakeInference(): Promise<FakeInference> {
  // The array is live: the server matches against whatever it holds when a request arrives.
  const fixtures: Fixture[] = [];
  const instance = await createServer(fixtures, {
    host: '127.0.0.1',
    port: 0,
    logLevel: 'silent',
    journalMaxEntries: 0,
  });
  instance.server.unref();
  const port = Number(new URL(instance.url).port);
  const add = (match: Fixture['match'], response: Parameters<typeof normalizeResponse>[0]) => {
    fixtures.push({ match, response: normalizeResponse(response) });
  };
  return {
    url: instance.url,
    port,
    sandboxUrl: `http://${FAKE_INFERENCE_HOST}:${port}`,
    serviceRoute: `${FAKE_INFERENCE_HOST}=127.0.0.1:${port}`,
    script(runtime, turn) {
      const final = {
        content: turn.reply,
        ...(turn.usage ? { usage: usageFor(runtime, turn.usage) } : {}),
      } as Parameters<typeof normalizeResponse>[0];
      if (turn.command === undefined) {
        add({ userMessage: turn.marker }, final);
        return;
      }
      const tool = SHELL_TOOLS[runtime];
      // hasToolResult looks at the current turn only (after the last user message): the call
      // first, the final message once the CLI has sent the tool's result back.
      add(
        { userMessage: turn.marker, hasToolResult: false },
        { toolCalls: [{ name: tool.name, arguments: JSON.stringify(tool.args(turn.command)) }] },
      );
      add({ userMessage: turn.marker, hasToolResult: true }, final);
    },
    requests: () => instance.journal.getAll().map(toRequest),
    clearRequests: () => instance.journal.clearEntries(),
    async close() {
      instance.closeLiveSessions();
      await new Promise<void>((resolve) => {
        instance.server.close(() => resolve());
        instance.server.closeAllConnections();
      });
    },
  };
}
