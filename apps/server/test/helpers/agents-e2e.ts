// The agent end-to-end harness (issue 10): the real server with the real runtime adapters, a real
// sandboxd, a fake git host serving a test repository over HTTPS, and the fake inference provider,
// both reached from the sandbox through its egress proxy (SANDBOXD_SERVICE_ROUTES maps
// `git.test` and `inference.test` to their loopback listeners; with `gateway: 'lan'` the fake is
// on a private address of a test network instead). Everything a test does goes
// through the public API: apply a manifest, start a conversation, follow its SSE stream.
//
//   const a = await startAgentsHarness();
//   const user = await a.h.user();
//   const setup = await a.setup(user, { runtime: 'claude' });
//   a.fake.script('claude', { marker: 'EDIT-1', command: 'echo x >> app/notes.txt', reply: 'Done.' });
//   const conv = await a.h.start(user, { agent_id: setup.agentId, vault_id: setup.vaultId, prompt: 'EDIT-1' });
//   const turn = await a.followTurn(user, conv.id);          // SSE until the turn's stage ends
//   assert.equal(await a.readFile(conv.id, 'app/notes.txt'), ...);
//   await a.close();
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { createSandboxClient } from '@paddock/sandbox-client';
import { createTestNet } from '../../../sandboxd/test/netns.ts';
import { sharedLayerDir } from '../../../sandboxd/test/runtime-layer-cache.ts';
import type { Runtime } from '../../src/agents/agents.tables.ts';
import { defaultRuntimes } from '../../src/conversations/turns/runtimes/registry.ts';
import type { EngineOptions } from '../../src/deps.ts';
import { type ConversationHarness, startConversationHarness } from './conversations.ts';
import type { TestUser } from './factories.ts';
import { type FakeInference, PROVIDER_ENV, startFakeInference } from './fake-inference.ts';
import { type FakeGitHost, startFakeGitHost } from './git-server.ts';
import { openSse, type SseMessage } from './sse-client.ts';

/** The host name the sandbox clones the test repository from. */
export const FAKE_GIT_HOST = 'git.test';
/** The test repository: cloned into /home/sandbox/app. */
export const REPO_FILES: Record<string, string> = {
  'README.md': '# app\n',
  'notes.txt': 'original\n',
};

export interface AgentSetup {
  agentId: string;
  environmentId: string;
  vaultId: string;
  /** The provider key put in the vault (a test asserts it never shows in a log). */
  key: string;
}

export interface SetupOptions {
  runtime: Runtime;
  model?: string;
  /** Extra environment variables (merged over the provider base URL). */
  envVars?: Record<string, string>;
  /** Vault secrets (merged over the provider key). */
  secrets?: Record<string, string>;
  /** Without the provider key in the vault (the missing-credential case). */
  withoutKey?: boolean;
  /** Extra fields of the agent's spec (system, skills, mcp_servers). */
  agent?: Record<string, unknown>;
  /** Extra fields of the environment's spec (packages, setup_script, networking). */
  environment?: Record<string, unknown>;
}

export interface TurnEnd {
  /** Every SSE message seen while following, heartbeats excluded. */
  messages: SseMessage[];
  /** The `turn` stage row that ended the turn (done, failed or interrupted). */
  end: {
    id: string;
    state: string;
    turn_id: string | null;
    message: string | null;
    duration_ms: number | null;
  };
}

export interface AgentsHarness {
  h: ConversationHarness;
  fake: FakeInference;
  git: FakeGitHost;
  /** https://git.test:<port>/acme/app.git */
  repoUrl: string;
  /** POST /api/apply; throws unless every resource applied. */
  apply(user: TestUser, resources: unknown[]): Promise<{ kind: string; name: string; id: string | null }[]>;
  /** Applies an environment (cloning the test repository, the provider base URL), a vault (the key) and an agent. */
  setup(user: TestUser, options: SetupOptions): Promise<AgentSetup>;
  /**
   * Follows the conversation's SSE stream (from just after `after`, an event id) until a `turn`
   * stage ends or a provisioning stage fails; default timeout 120 s.
   */
  followTurn(user: TestUser, conversationId: string, after?: string, timeoutMs?: number): Promise<TurnEnd>;
  /** GET /api/conversations/:id/events?streams=events, every page (the common turn events). */
  turnEvents(user: TestUser, conversationId: string): Promise<Record<string, unknown>[]>;
  /** A file of the conversation's current sandbox (relative to /home/sandbox). */
  readFile(user: TestUser, conversationId: string, path: string): Promise<string>;
  /** Resolves once the runtime session saved after `since` is in the database. */
  waitForSessionSaved(conversationId: string, since: Date, timeoutMs?: number): Promise<void>;
  /** Makes the conversation idle for 61 minutes; resolves once its sandbox is reclaimed. */
  reclaim(user: TestUser, conversationId: string): Promise<void>;
  close(): Promise<void>;
}

async function listen(): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

export interface AgentsHarnessOptions {
  engine?: EngineOptions;
  env?: Record<string, string>;
  /**
   * How sandboxes reach the fake provider (docs/agents.md "Using a gateway"): `route` (default), a
   * service route to its loopback listener; `lan`, its private address in a test network this
   * harness creates (and removes at close), opened with SANDBOXD_EGRESS_ALLOW_CIDRS and named by
   * the test hosts override.
   */
  gateway?: Gateway;
}

export type Gateway = 'route' | 'lan';

export async function startAgentsHarness(options: AgentsHarnessOptions = {}): Promise<AgentsHarness> {
  const lan = options.gateway === 'lan' ? await createTestNet() : null;
  const fake = await startFakeInference(lan ? { lan } : {}).catch((err: unknown) => {
    lan?.close();
    throw err;
  });
  const gitListener = await listen();
  const git = startFakeGitHost(gitListener.server);
  git.addRepo('acme/app', [{ files: REPO_FILES }]);
  const repoUrl = `https://${FAKE_GIT_HOST}:${gitListener.port}/acme/app.git`;
  let h: ConversationHarness;
  try {
    h = await startConversationHarness({
      runtimeLayer: true,
      sandboxdEnv: {
        // The real CLIs: the test run's shared runtime layer (the runtime stage probes them there).
        SANDBOXD_RUNTIME_LAYER: sharedLayerDir(),
        SANDBOXD_SERVICE_ROUTES: [
          `${FAKE_GIT_HOST}=127.0.0.1:${gitListener.port}`,
          ...(lan ? [] : [fake.serviceRoute]),
        ].join(','),
        ...(lan ? { SANDBOXD_EGRESS_ALLOW_CIDRS: lan.allowEnv } : {}),
      },
      ...(lan ? { sandboxdNet: lan, sandboxdHosts: fake.lanHosts } : {}),
      ...(options.env ? { env: options.env } : {}),
      engine: {
        runtimes: defaultRuntimes,
        // The fake git host's certificate is self-signed; TLS is still used.
        gitEnv: { GIT_SSL_NO_VERIFY: 'true' },
        lifecycle: { tickMs: 100 },
        ...options.engine,
      },
    });
  } catch (err) {
    git.close();
    gitListener.server.close();
    await fake.close();
    lan?.close();
    throw err;
  }
  const sandbox = createSandboxClient({ baseUrl: h.sandboxd.url, token: h.sandboxd.token });
  const name = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

  const harness: AgentsHarness = {
    h,
    fake,
    git,
    repoUrl,
    async apply(user, resources) {
      const res = await h.api(user, 'POST', '/api/apply', { resources });
      const results = (res.body?.results ?? []) as {
        kind: string;
        name: string;
        action: string;
        id: string | null;
      }[];
      if (res.status !== 200 || results.some((r) => r.action === 'error' || r.id === null))
        throw new Error(`apply answered ${res.status}: ${JSON.stringify(res.body)}`);
      return results;
    },
    async setup(user, opts) {
      const provider = PROVIDER_ENV[opts.runtime];
      const key = `sk-test-${randomBytes(12).toString('hex')}`;
      const names = { environment: name('env'), vault: name('vault'), agent: name('agent') };
      const results = await harness.apply(user, [
        {
          kind: 'Environment',
          name: names.environment,
          spec: {
            env_vars: {
              [provider.baseUrl]: `${fake.sandboxUrl}${provider.path}`,
              ...provider.testEnv,
              ...opts.envVars,
            },
            repos: [{ url: repoUrl }],
            ...opts.environment,
          },
        },
        {
          kind: 'Vault',
          name: names.vault,
          spec: { secrets: { ...(opts.withoutKey ? {} : { [provider.key]: key }), ...opts.secrets } },
        },
        {
          kind: 'Agent',
          name: names.agent,
          spec: {
            model: opts.model ?? provider.model,
            runtime: opts.runtime,
            environment: names.environment,
            vaults: [names.vault],
            ...opts.agent,
          },
        },
      ]);
      const id = (kind: string) => results.find((r) => r.kind === kind)?.id ?? '';
      return { agentId: id('Agent'), environmentId: id('Environment'), vaultId: id('Vault'), key };
    },
    async followTurn(user, conversationId, after, timeoutMs = 120_000) {
      const query = after ? `?after=${after}` : '';
      const stream = await openSse(`${h.url}/api/conversations/${conversationId}/stream${query}`, user.auth);
      if (stream.status !== 200) {
        stream.close();
        throw new Error(`stream answered ${stream.status}`);
      }
      try {
        const ended = await stream.next((m) => {
          if (m.event !== 'stage' || !m.data) return false;
          const data = JSON.parse(m.data) as { stage?: string; state?: string };
          return data.stage === 'turn' && data.state !== 'started';
        }, timeoutMs);
        const end = JSON.parse(ended.data ?? '{}') as TurnEnd['end'];
        return { messages: stream.messages.filter((m) => m.event !== 'comment'), end };
      } finally {
        stream.close();
      }
    },
    async turnEvents(user, conversationId) {
      const out: Record<string, unknown>[] = [];
      let after = '';
      for (;;) {
        const res = await h.api(
          user,
          'GET',
          `/api/conversations/${conversationId}/events?streams=events&limit=500${after ? `&after=${after}` : ''}`,
        );
        if (res.status !== 200) throw new Error(`events answered ${res.status}: ${JSON.stringify(res.body)}`);
        const page = res.body as { data: Record<string, unknown>[]; meta: { next_cursor: string | null } };
        out.push(...page.data);
        if (!page.meta.next_cursor) return out;
        after = page.meta.next_cursor;
      }
    },
    async readFile(user, conversationId, path) {
      const conversation = await h.get(user, conversationId);
      const sandboxName = conversation.sandbox?.name;
      if (!sandboxName) throw new Error(`conversation ${conversationId} has no sandbox`);
      const r = await sandbox.exec(sandboxName, {
        cmd: ['cat', '--', path.startsWith('/') ? path : `/home/sandbox/${path}`],
        timeoutMs: 10_000,
      });
      if (r.exitCode !== 0) throw new Error(`cat ${path} exited ${r.exitCode}: ${r.stderr.toString('utf8')}`);
      return r.stdout.toString('utf8');
    },
    waitForSessionSaved: (conversationId, since, timeoutMs) =>
      h.waitForSessionSaved(conversationId, since, timeoutMs),
    reclaim: (user, conversationId) => h.reclaim(user, conversationId),
    async close() {
      await h.close();
      git.close();
      gitListener.server.close();
      await fake.close();
      lan?.close();
    },
  };
  return harness;
}
