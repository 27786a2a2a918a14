// The conversation engine under test: a real sandboxd (one per test file), the real app on a
// real port (SSE needs one) with the scripted runtime (the prompt is the turn's shell script),
// and helpers that go through the public API: users, agents, environments, vaults, starting a
// conversation, waiting for a status, reading its log.
//
//   const h = await startConversationHarness();
//   const user = await h.user();
//   const agent = await h.agent(user);
//   const conv = await h.start(user, { agent_id: agent, prompt: 'echo hello' });
//   await h.waitFor(user, conv.id, (c) => c.status === 'idle');
//   assert.equal(await h.stdout(conv.id), 'hello\n');
//   await h.close();
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { startTestSandboxd, type TestSandboxd } from '../../../sandboxd/test/harness.ts';
import type { TestNet } from '../../../sandboxd/test/netns.ts';
import { type Config, type Env, parseConfig } from '../../src/config/config.ts';
import type { ConversationView, TurnView } from '../../src/conversations/api/conversations.schemas.ts';
import { openDatabase } from '../../src/db/database.ts';
import { freePort } from '../../src/db/embedded.ts';
import { createDeps, type Deps, type EngineOptions } from '../../src/deps.ts';
import { buildApp } from '../../src/http/app.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { VERSION } from '../../src/version.ts';
import { scriptedRuntimes } from '../fixtures/scripted-runtime.ts';
import { testEnv } from './app.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { createVerifiedUser, type TestUser } from './factories.ts';

// biome-ignore lint/suspicious/noExplicitAny: test responses are parsed JSON, asserted field by field
type Json = any;

export interface ConversationHarness {
  /** The app's base URL (a real listening port). */
  url: string;
  deps: Deps;
  config: Config;
  database: TestDatabase;
  sandboxd: TestSandboxd;
  /** Stops the sandbox backend, keeping its state (the backend is "down"). */
  stopSandboxd(): Promise<void>;
  /** Starts it again on the same address, token and state. */
  restartSandboxd(): Promise<void>;
  /** Every log line the server wrote, raw JSON text. */
  logs: string[];
  user(): Promise<TestUser>;
  /** Creates an agent through the API (runtime claude, mapped to the scripted runtime). */
  agent(user: TestUser, body?: Record<string, unknown>): Promise<string>;
  environment(user: TestUser, body?: Record<string, unknown>): Promise<string>;
  vault(user: TestUser, body?: Record<string, unknown>): Promise<string>;
  /** Any API call; JSON in, parsed JSON out. */
  api(
    user: TestUser | null,
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: Json; headers: Headers }>;
  /** POST /api/conversations; throws unless 201. */
  start(user: TestUser, body: Record<string, unknown>): Promise<ConversationView>;
  get(user: TestUser, id: string): Promise<ConversationView>;
  turns(user: TestUser, id: string): Promise<TurnView[]>;
  /** Polls GET /api/conversations/:id until `until` holds (default 20 s). */
  waitFor(
    user: TestUser,
    id: string,
    until: (c: ConversationView) => boolean,
    timeoutMs?: number,
  ): Promise<ConversationView>;
  /** Polls the turns until the given turn (1-based seq) has ended. */
  waitForTurn(user: TestUser, id: string, seq: number, timeoutMs?: number): Promise<TurnView>;
  /** The persisted log rows of a conversation, in order. */
  events(id: string): Promise<
    {
      id: string;
      stream: string;
      turn_id: string | null;
      text: string | null;
      stage: string | null;
      state: string | null;
      message: string | null;
    }[]
  >;
  /** The persisted stdout of a conversation (or of one turn), concatenated. */
  stdout(id: string, turnId?: string): Promise<string>;
  /** When the runtime session state was last saved (null: never). */
  sessionSavedAt(id: string): Promise<Date | null>;
  /** Resolves once the runtime session saved at or after `since` is in the database. */
  waitForSessionSaved(id: string, since: Date, timeoutMs?: number): Promise<void>;
  /** Makes the conversation idle for 61 minutes; resolves once its sandbox is reclaimed. */
  reclaim(user: TestUser, id: string): Promise<void>;
  /**
   * A second server instance on the same database and backend (another "process" of the
   * cluster: its own ownership connection, command LISTEN and lifecycle clock).
   */
  secondInstance(): Promise<{
    url: string;
    deps: Deps;
    api: ConversationHarness['api'];
    close(): Promise<void>;
  }>;
  /** Destroys a sandbox on the backend directly, behind the server's back. */
  destroyBackendSandbox(name: string): Promise<void>;
  /** Backend sandboxes that exist right now (by name). */
  backendSandboxes(): Promise<string[]>;
  close(): Promise<void>;
}

/** An API client for one app instance: JSON in, parsed JSON out. */
function apiAt(url: string): ConversationHarness['api'] {
  return async (user, method, path, body, headers = {}) => {
    const res = await fetch(url + path, {
      method,
      headers: {
        ...(user ? user.auth : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // Not JSON (an SSE body): kept as text.
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
}

export interface HarnessOptions {
  env?: Env;
  engine?: EngineOptions;
  /** The first instance listens on this port (default: any free one), e.g. to match PUBLIC_URL. */
  port?: number;
  /** Extra SANDBOXD_* environment of the backend (e.g. SANDBOXD_SERVICE_ROUTES for a fake upstream). */
  sandboxdEnv?: Record<string, string>;
  /** The backend's test hosts override (name -> IP), e.g. a fake upstream in a test network. */
  sandboxdHosts?: Record<string, string>;
  /** The test network the backend must reach (netns.ts), with SANDBOXD_EGRESS_ALLOW_CIDRS in sandboxdEnv. */
  sandboxdNet?: TestNet;
  /** The backend with the test run's shared runtime layer (the agent CLIs in every sandbox). */
  runtimeLayer?: boolean;
  /**
   * Where the server reaches the backend, given the backend's URL: a proxy in front of it
   * (sandbox-fault-proxy.ts). Default: the backend itself. The harness's own backend calls
   * (backendSandboxes, destroyBackendSandbox) still go to the backend directly.
   */
  sandboxUrl?: (backendUrl: string) => Promise<string>;
}

export async function startConversationHarness(options: HarnessOptions = {}): Promise<ConversationHarness> {
  // A fixed address, so the backend can be stopped and started again where the app expects it.
  const port = await freePort();
  const sandboxdEnv = { ...options.sandboxdEnv, SANDBOXD_ADDR: `127.0.0.1:${port}` };
  const backend = {
    ...(options.runtimeLayer ? { runtimeLayer: true } : {}),
    ...(options.sandboxdHosts ? { hosts: options.sandboxdHosts } : {}),
    ...(options.sandboxdNet ? { net: options.sandboxdNet } : {}),
  };
  let sandboxd = await startTestSandboxd({ env: sandboxdEnv, ...backend });
  const first = sandboxd;
  let down = false;
  const database = await createTestDatabase().catch(async (err: unknown) => {
    await sandboxd.stop();
    throw err;
  });
  const sandboxUrl = options.sandboxUrl
    ? await options.sandboxUrl(first.url).catch(async (err: unknown) => {
        await sandboxd.stop().catch(() => {});
        await database.drop().catch(() => {});
        throw err;
      })
    : first.url;
  const { config } = parseConfig(
    testEnv({
      DATABASE_URL: database.url,
      DATABASE_SSL: 'false',
      SANDBOX_BASE_URL: sandboxUrl,
      SANDBOX_TOKEN: sandboxd.token,
      ...options.env,
    }),
  );
  const logs: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const instance = async (db: TestDatabase['handle'], port = 0) => {
    const deps = createDeps({
      version: VERSION,
      config,
      logger: createLogger({ level: config.logLevel, destination }),
      metrics: createMetrics(),
      database: db,
      engine: { runtimes: scriptedRuntimes, ...options.engine },
    });
    const app = await buildApp(deps);
    try {
      await app.listen({ port, host: '127.0.0.1' });
      await deps.conversationEngine.start();
    } catch (err) {
      // Nothing of a half-started app may keep the test process alive (its pool, its engine).
      await app.close().catch(() => {});
      throw err;
    }
    const address = app.server.address();
    return {
      app,
      deps,
      url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`,
    };
  };
  const { app, deps, url } = await instance(database.handle, options.port).catch(async (err: unknown) => {
    await sandboxd.stop().catch(() => {});
    await database.drop().catch(() => {});
    throw err;
  });
  const others: (() => Promise<void>)[] = [];

  const api = apiAt(url);

  const created = async (user: TestUser, path: string, body: Record<string, unknown>) => {
    const res = await api(user, 'POST', path, body);
    if (res.status !== 201)
      throw new Error(`POST ${path} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body as { id: string };
  };

  const name = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

  const harness: ConversationHarness = {
    url,
    deps,
    config,
    database,
    get sandboxd() {
      return sandboxd;
    },
    async stopSandboxd() {
      down = true;
      await sandboxd.stop({ keepData: true });
    },
    async restartSandboxd() {
      sandboxd = await startTestSandboxd({
        env: sandboxdEnv,
        dataDir: first.dataDir,
        token: first.token,
        ...backend,
      });
      down = false;
    },
    logs,
    api,
    user: () => createVerifiedUser(deps.db),
    async agent(user, body = {}) {
      return (
        await created(user, '/api/agents', {
          name: name('agent'),
          model: 'anthropic/claude-sonnet-4-5',
          runtime: 'claude',
          ...body,
        })
      ).id;
    },
    async environment(user, body = {}) {
      return (await created(user, '/api/environments', { name: name('env'), ...body })).id;
    },
    async vault(user, body = {}) {
      return (await created(user, '/api/vaults', { name: name('vault'), ...body })).id;
    },
    async start(user, body) {
      const res = await api(user, 'POST', '/api/conversations', body);
      if (res.status !== 201) throw new Error(`start answered ${res.status}: ${JSON.stringify(res.body)}`);
      return res.body as ConversationView;
    },
    async get(user, id) {
      const res = await api(user, 'GET', `/api/conversations/${id}`);
      if (res.status !== 200) throw new Error(`get answered ${res.status}: ${JSON.stringify(res.body)}`);
      return res.body as ConversationView;
    },
    async turns(user, id) {
      const res = await api(user, 'GET', `/api/conversations/${id}/turns`);
      if (res.status !== 200) throw new Error(`turns answered ${res.status}: ${JSON.stringify(res.body)}`);
      return (res.body as { data: TurnView[] }).data;
    },
    async waitFor(user, id, until, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      let last: ConversationView | undefined;
      while (Date.now() < deadline) {
        last = await harness.get(user, id);
        if (until(last)) return last;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`conversation ${id} did not reach the expected state; last: ${JSON.stringify(last)}`);
    },
    async waitForTurn(user, id, seq, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      let last: TurnView | undefined;
      while (Date.now() < deadline) {
        last = (await harness.turns(user, id)).find((t) => t.seq === seq);
        if (last && !['queued', 'running'].includes(last.status)) {
          // The conversation row follows the turn row in the same server step.
          await harness.waitFor(user, id, (c) => c.status !== 'running' && c.status !== 'pending', timeoutMs);
          return last;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`turn ${seq} of ${id} did not end; last: ${JSON.stringify(last)}`);
    },
    async events(id) {
      const rows = await deps.db
        .selectFrom('log_events')
        .select(['id', 'stream', 'turn_id', 'data', 'stage', 'state', 'message'])
        .where('conversation_id', '=', id)
        .orderBy('id')
        .execute();
      return rows.map((r) => ({
        id: String(r.id),
        stream: r.stream,
        turn_id: r.turn_id,
        text: r.data ? r.data.toString('utf8') : null,
        stage: r.stage,
        state: r.state,
        message: r.message,
      }));
    },
    async sessionSavedAt(id) {
      const row = await harness.deps.db
        .selectFrom('conversations')
        .select('session_state_at')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      return row.session_state_at;
    },
    async waitForSessionSaved(id, since, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const at = await harness.sessionSavedAt(id);
        if (at && at >= since) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`the session of ${id} was not saved after ${since.toISOString()}`);
    },
    async reclaim(user, id) {
      await harness.deps.db
        .updateTable('conversations')
        .set({ last_activity_at: new Date(Date.now() - 61 * 60_000) })
        .where('id', '=', id)
        .execute();
      await harness.waitFor(user, id, (c) => c.sandbox?.status === 'terminated', 60_000);
    },
    async stdout(id, turnId) {
      const rows = await harness.events(id);
      return rows
        .filter((r) => r.stream === 'stdout' && (turnId === undefined || r.turn_id === turnId))
        .map((r) => r.text ?? '')
        .join('');
    },
    async secondInstance() {
      const handle = openDatabase({ connectionString: database.url, max: 10, connectionTimeoutMillis: 3000 });
      const other = await instance(handle);
      const close = async () => {
        await other.app.close().catch(() => {});
        await handle.close().catch(() => {});
      };
      others.push(close);
      return { url: other.url, deps: other.deps, api: apiAt(other.url), close };
    },
    async destroyBackendSandbox(name) {
      const res = await fetch(`${sandboxd.url}/v1/sandboxes/${name}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${sandboxd.token}` },
      });
      if (!res.ok && res.status !== 404) throw new Error(`destroy answered ${res.status}`);
    },
    async backendSandboxes() {
      const res = await fetch(`${sandboxd.url}/v1/sandboxes`, {
        headers: { authorization: `Bearer ${sandboxd.token}` },
      });
      const body = (await res.json()) as { sandboxes: { name: string }[] };
      return body.sandboxes.map((s) => s.name);
    },
    async close() {
      for (const close of others) await close();
      await app.close().catch(() => {});
      // A backend left down is started once more so that stopping it removes everything.
      if (down) await harness.restartSandboxd().catch(() => {});
      await sandboxd.stop().catch(() => {});
      await database.drop().catch(() => {});
    },
  };
  return harness;
}

/** Polls `check` every 50 ms until it is true; throws after `timeoutMs`. */
export async function waitUntil(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('condition not reached');
}
