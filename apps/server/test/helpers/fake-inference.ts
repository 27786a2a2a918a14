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
// Reached from inside a sandbox as `fake.sandboxUrl` (http://inference.test:<port>), one of the two
// ways docs/agents.md "Using a gateway" gives an operator:
// - by default, a gateway on this host: sandboxd's egress proxy routes that exact name and port to
//   the loopback listener (SANDBOXD_SERVICE_ROUTES);
// - with `startFakeInference({ lan })`, a gateway on the LAN: the fake also listens on a private
//   address of a test network (apps/sandboxd/test/netns.ts), which the sandbox reaches by name
//   (`fake.lanHosts`, the hosts override standing in for DNS) once SANDBOXD_EGRESS_ALLOW_CIDRS
//   opens its range.
// The servers are unref'd: they never keep a test process alive, and close() (or the end of the
// process) stops them. Requests are recorded whole by a small forwarding front (aimock's own
// journal cuts bodies over 64 KB), so `requests()` shows exactly what each CLI sent.
import http from 'node:http';
import { createServer, type Fixture, normalizeResponse } from '@copilotkit/aimock';
import type { TestNet } from '../../../sandboxd/test/netns.ts';
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

/**
 * Each runtime's provider settings in the sandbox env: the key's variable, the base URL's (the
 * fake's URL plus `path`), a model the CLI accepts, test-only settings (no retries), and the
 * endpoint the CLI posts a turn to (after the fake's URL).
 */
export const PROVIDER_ENV: Record<
  Runtime,
  {
    key: string;
    baseUrl: string;
    path: string;
    model: string;
    testEnv: Record<string, string>;
    endpoint: string;
  }
> = {
  claude: {
    key: 'ANTHROPIC_API_KEY',
    baseUrl: 'ANTHROPIC_BASE_URL',
    path: '',
    model: 'anthropic/claude-sonnet-4-5',
    testEnv: { CLAUDE_CODE_MAX_RETRIES: '0' },
    endpoint: '/v1/messages',
  },
  gemini: {
    key: 'GEMINI_API_KEY',
    baseUrl: 'GOOGLE_GEMINI_BASE_URL',
    path: '',
    model: 'google/gemini-2.5-flash',
    testEnv: {},
    endpoint: '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
  },
  codex: {
    key: 'OPENAI_API_KEY',
    baseUrl: 'OPENAI_BASE_URL',
    path: '/v1',
    model: 'openai/gpt-5.5',
    testEnv: {},
    endpoint: '/v1/responses',
  },
  opencode: {
    key: 'OPENAI_API_KEY',
    baseUrl: 'OPENAI_BASE_URL',
    path: '/v1',
    model: 'openai/gpt-5.5',
    testEnv: {},
    endpoint: '/v1/chat/completions',
  },
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
  method: string;
  path: string;
  /** The request body as the CLI sent it (parsed JSON; the raw text when it is not JSON). */
  body: unknown;
  /** Every string in the body, joined: to look for what a CLI sent (earlier turns on resume). */
  text: string;
  /** The status the fake answered with. */
  status: number;
}

export interface FakeInference {
  /** http://127.0.0.1:<port>, for a CLI run on the host. */
  url: string;
  port: number;
  /** http://inference.test:<port>, for a CLI in a sandbox (the LAN listener's port with `lan`). */
  sandboxUrl: string;
  /** `inference.test=127.0.0.1:<port>`, an entry of SANDBOXD_SERVICE_ROUTES (not with `lan`). */
  serviceRoute: string;
  /** With `lan`: the test hosts override naming the fake's LAN address (`inference.test` → its ip). */
  lanHosts: Record<string, string>;
  /** Adds a scripted turn: a shell tool call (if `command`), then the final message. */
  script(runtime: Runtime, turn: ScriptedTurn): void;
  /** A prompt containing `marker` is answered with an API error (e.g. 401 authentication_error). */
  scriptError(marker: string, error: { status: number; type: string; message: string }): void;
  /**
   * A request whose text contains `marker` is answered `status` with no body at all (as an HTTP
   * server's own parser answers a request it cannot read), before aimock sees it.
   */
  scriptBareStatus(marker: string, status: number): void;
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

/** Every string leaf of a JSON value (message texts, tool inputs and results, system prompts). */
function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) strings(v, out);
  return out;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Starts the recording front on loopback: every request is kept whole, then passed to aimock. */
async function startFront(
  upstreamPort: number,
  seen: FakeRequest[],
  bare: Map<string, number>,
): Promise<http.Server> {
  const agent = new http.Agent({ keepAlive: false });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const body = raw.length > 0 ? parse(raw.toString('utf8')) : null;
      const record: FakeRequest = {
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        body,
        text: strings(body).join('\n'),
        status: 0,
      };
      seen.push(record);
      const status = [...bare].find(([marker]) => record.text.includes(marker))?.[1];
      if (status !== undefined) {
        // What an HTTP server's own parser answers a request it cannot read: a status, no body.
        record.status = status;
        res.writeHead(status, { connection: 'close' }).end();
        return;
      }
      const headers = { ...req.headers, 'content-length': String(raw.length) };
      delete headers['transfer-encoding'];
      const upstream = http.request(
        { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers, agent },
        (answer) => {
          record.status = answer.statusCode ?? 0;
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      upstream.end(raw);
    });
    req.on('error', () => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  return server;
}

export interface FakeInferenceOptions {
  /**
   * Also listen on `net.ip` in the test network (netns.ts): the fake as a gateway on a private
   * address of the LAN, reached by name through the hosts override and SANDBOXD_EGRESS_ALLOW_CIDRS
   * (`sandboxUrl` and `sandboxHosts` then point there instead of the loopback service route).
   */
  lan?: TestNet;
}

export async function startFakeInference(options: FakeInferenceOptions = {}): Promise<FakeInference> {
  // The array is live: the server matches against whatever it holds when a request arrives.
  const fixtures: Fixture[] = [];
  const instance = await createServer(fixtures, {
    host: '127.0.0.1',
    port: 0,
    logLevel: 'silent',
    journalMaxEntries: 1,
  });
  instance.server.unref();
  // aimock's own journal cuts bodies over 64 KB (a CLI's system prompt and tools alone are more),
  // so requests are recorded whole by a small front that forwards them.
  const seen: FakeRequest[] = [];
  const bare = new Map<string, number>();
  const front = await startFront(Number(new URL(instance.url).port), seen, bare);
  const address = front.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  let lanPort = 0;
  if (options.lan) {
    // The test network's helper accepts in the far namespace; the front serves those connections.
    const lan = await options.lan.listen();
    lan.server.unref();
    lan.server.on('connection', (socket) => front.emit('connection', socket));
    lanPort = lan.port;
  }
  const add = (match: Fixture['match'], response: Parameters<typeof normalizeResponse>[0]) => {
    fixtures.push({ match, response: normalizeResponse(response) });
  };
  const stop = (server: http.Server) =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    sandboxUrl: `http://${FAKE_INFERENCE_HOST}:${options.lan ? lanPort : port}`,
    serviceRoute: `${FAKE_INFERENCE_HOST}=127.0.0.1:${port}`,
    lanHosts: options.lan ? { [FAKE_INFERENCE_HOST]: options.lan.ip } : {},
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
    scriptError(marker, error) {
      add({ userMessage: marker }, {
        error: { message: error.message, type: error.type },
        status: error.status,
      } as Parameters<typeof normalizeResponse>[0]);
    },
    scriptBareStatus(marker, status) {
      bare.set(marker, status);
    },
    requests: () => [...seen],
    clearRequests: () => {
      seen.length = 0;
    },
    async close() {
      instance.closeLiveSessions();
      await stop(front);
      await stop(instance.server);
    },
  };
}
