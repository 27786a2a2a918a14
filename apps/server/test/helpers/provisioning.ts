// Provisioner tests: the real app deps (database, secrets, API keys), a real sandboxd, and a
// LogWriter that keeps rows in memory (redacting like the real one) so the provisioner can be
// driven on its own.
import { randomBytes } from 'node:crypto';
import { createSandboxClient, type SandboxClient } from '@paddock/sandbox-client';
import { v7 as uuidv7 } from 'uuid';
import { startTestSandboxd, type TestSandboxd } from '../../../sandboxd/test/harness.ts';
import type { McpServer, Runtime, Skill } from '../../src/agents/agents.tables.ts';
import type {
  AgentSnapshot,
  LogWriter,
  OwnerLease,
  ProvisionInput,
  RuntimeAdapter,
  StageEvent,
} from '../../src/conversations/contracts.ts';
import { createSecretRegistry, type SecretRegistry } from '../../src/conversations/log/redactor.ts';
import { storedEvent } from '../../src/conversations/log/turn-events.ts';
import { createCallbackKeys } from '../../src/conversations/provisioning/callback-key.ts';
import { createDestroyQueue } from '../../src/conversations/provisioning/destroy-queue.ts';
import { createProvisioner, type ProvisionerDeps } from '../../src/conversations/provisioning/provisioner.ts';
import type { EnvironmentInput } from '../../src/environments/environments.schema.ts';
import { buildTestApp, type TestApp } from './app.ts';
import { createVerifiedUser, type TestUser } from './factories.ts';

export interface MemoryRow {
  stream: 'stdout' | 'stderr' | 'stage' | 'events';
  text?: string;
  stage?: StageEvent;
}

/** A LogWriter that redacts through the registry and keeps rows in memory (test code only). */
export function memoryWriter(registry: SecretRegistry): LogWriter & { rows: MemoryRow[]; text(): string } {
  const rows: MemoryRow[] = [];
  const redactors = { stdout: registry.stream(), stderr: registry.stream() };
  const drain = () => {
    for (const stream of ['stdout', 'stderr'] as const) {
      const rest = redactors[stream].flush();
      if (rest.length > 0) rows.push({ stream, text: rest.toString('utf8') });
    }
  };
  return {
    rows,
    output(stream, chunk) {
      const out = redactors[stream].write(chunk);
      if (out.length > 0) rows.push({ stream, text: out.toString('utf8') });
    },
    event(_turnId, event) {
      const data = storedEvent(event, registry, 32 * 1024);
      if (data) rows.push({ stream: 'events', text: data.toString('utf8') });
    },
    async stage(event) {
      drain();
      rows.push({
        stream: 'stage',
        stage: {
          ...event,
          ...(event.message ? { message: registry.redact(event.message).toString('utf8') } : {}),
        },
      });
    },
    async flush() {
      drain();
    },
    async close() {
      drain();
    },
    failed: new Promise<Error>(() => {}),
    text() {
      drain();
      return rows
        .filter((r) => r.stream === 'stdout' || r.stream === 'stderr')
        .map((r) => r.text)
        .join('');
    },
  };
}

export function stagesOf(rows: MemoryRow[]): string[] {
  return rows.filter((r) => r.stage).map((r) => `${r.stage?.stage}:${r.stage?.state}`);
}

export const testAdapter: RuntimeAdapter = {
  runtime: 'claude',
  sessionPaths: ['/home/sandbox/.test-runtime/sessions', '/home/sandbox/.test-runtime/missing'],
  skillsDir: '/home/sandbox/.test-runtime/skills',
  buildTurn: () => ({ argv: ['true'], env: {}, cwd: '/home/sandbox', files: [] }),
  parseLine: () => [],
};

export interface ProvisionHarness {
  t: TestApp;
  sandboxd: TestSandboxd;
  client: SandboxClient;
  user: TestUser;
  close(): Promise<void>;
}

export async function startProvisionHarness(
  options: { sandboxd?: Parameters<typeof startTestSandboxd>[0]; env?: Record<string, string> } = {},
): Promise<ProvisionHarness> {
  const sandboxd = await startTestSandboxd(options.sandboxd ?? {});
  const t = await buildTestApp({
    env: { SANDBOX_BASE_URL: sandboxd.url, SANDBOX_TOKEN: sandboxd.token, ...options.env },
  });
  const client = createSandboxClient({ baseUrl: sandboxd.url, token: sandboxd.token });
  const user = await createVerifiedUser(t.deps.db);
  return {
    t,
    sandboxd,
    client,
    user,
    async close() {
      await t.close();
      await sandboxd.stop();
    },
  };
}

export function provisionerFor(h: ProvisionHarness, extra: Partial<ProvisionerDeps> = {}) {
  return createProvisioner({
    db: h.t.deps.db,
    secrets: h.t.deps.secrets,
    inferenceCredentials: h.t.deps.inferenceCredentials,
    callbackKeys: createCallbackKeys({
      apiKeys: h.t.deps.apiKeys,
      callbackUrl: 'http://paddock.internal:4000',
    }),
    sandbox: h.client,
    destroys: createDestroyQueue({ db: h.t.deps.db, sandbox: h.client, logger: h.t.deps.logger }),
    logger: h.t.deps.logger,
    ...extra,
  });
}

export async function createEnvironment(
  h: ProvisionHarness,
  input: Partial<EnvironmentInput> & { secrets?: Record<string, string> } = {},
): Promise<string> {
  const ctx = { tenantId: h.user.id, actor: { kind: 'system' as const }, ip: null };
  const { secrets, ...fields } = input;
  const env = await h.t.deps.environments.create(ctx, {
    name: `env-${randomBytes(4).toString('hex')}`,
    env_vars: {},
    packages: {},
    repos: [],
    setup_script: null,
    networking_type: 'unrestricted',
    networking_config: { allowed_hosts: [] },
    metadata: {},
    ...fields,
  });
  for (const [key, value] of Object.entries(secrets ?? {})) {
    await h.t.deps.environments.secrets.upsert(ctx, env.id, key, value);
  }
  return env.id;
}

export async function createVault(h: ProvisionHarness, secrets: Record<string, string>): Promise<string> {
  const ctx = { tenantId: h.user.id, actor: { kind: 'system' as const }, ip: null };
  const vault = await h.t.deps.vaults.create(ctx, {
    name: `vault-${randomBytes(4).toString('hex')}`,
    metadata: {},
  });
  for (const [key, value] of Object.entries(secrets))
    await h.t.deps.vaults.secrets.upsert(ctx, vault.id, key, value);
  return vault.id;
}

export interface ConversationFixture {
  input: ProvisionInput;
  writer: ReturnType<typeof memoryWriter>;
  lease: OwnerLease;
  controller: AbortController;
}

/** A conversation and its pending sandbox row, as the engine creates them, plus a ProvisionInput. */
export async function newConversation(
  h: ProvisionHarness,
  options: {
    environmentId?: string | null;
    vaultId?: string | null;
    skills?: Skill[];
    mcpServers?: Record<string, McpServer>;
    /** The agent's runtime and model (default claude, "test"): they decide its provider host. */
    runtime?: Runtime;
    model?: string;
  } = {},
): Promise<ConversationFixture> {
  const db = h.t.deps.db;
  const tenantId = h.user.id;
  const agentId = uuidv7();
  await db
    .insertInto('agents')
    .values({
      id: agentId,
      tenant_id: tenantId,
      name: `agent-${randomBytes(4).toString('hex')}`,
      model: options.model ?? 'test',
      runtime: options.runtime ?? 'claude',
      environment_id: options.environmentId ?? null,
      system: null,
      description: null,
      skills: JSON.stringify(options.skills ?? []),
      mcp_servers: JSON.stringify(options.mcpServers ?? {}),
      metadata: '{}',
    })
    .execute();
  const conversationId = uuidv7();
  await db
    .insertInto('conversations')
    .values({
      id: conversationId,
      tenant_id: tenantId,
      agent_id: agentId,
      vault_id: options.vaultId ?? null,
      status: 'pending',
      source: 'api',
      title: 'test',
      owner_epoch: 1,
    })
    .execute();
  const sandboxId = uuidv7();
  const sandboxName = `paddock-${tenantId.replaceAll('-', '').slice(0, 8)}-${randomBytes(4).toString('hex')}`;
  await db
    .insertInto('sandboxes')
    .values({
      id: sandboxId,
      tenant_id: tenantId,
      conversation_id: conversationId,
      name: sandboxName,
      status: 'pending',
    })
    .execute();
  const agent: AgentSnapshot = {
    id: agentId,
    name: 'agent',
    runtime: options.runtime ?? 'claude',
    model: options.model ?? 'test',
    system: null,
    skills: options.skills ?? [],
    mcpServers: options.mcpServers ?? {},
    environmentId: options.environmentId ?? null,
  };
  const registry = createSecretRegistry();
  const writer = memoryWriter(registry);
  const lease: OwnerLease = { tenantId, conversationId, epoch: '1' };
  const controller = new AbortController();
  return {
    input: {
      lease,
      sandboxId,
      sandboxName,
      agent,
      vaultId: options.vaultId ?? null,
      adapter: testAdapter,
      writer,
      registry,
      signal: controller.signal,
    },
    writer,
    lease,
    controller,
  };
}

export async function sandboxRow(h: ProvisionHarness, sandboxId: string) {
  return await h.t.deps.db
    .selectFrom('sandboxes')
    .select(['status', 'reason', 'ready_at', 'checkpoint_id'])
    .where('id', '=', sandboxId)
    .executeTakeFirstOrThrow();
}

/** Runs a shell snippet in the sandbox as the sandbox user and returns stdout (fails on a non-zero exit). */
export async function sh(
  client: SandboxClient,
  name: string,
  script: string,
  env: Record<string, string> = {},
): Promise<string> {
  const r = await client.exec(name, { cmd: ['sh', '-c', script], env, timeoutMs: 30_000 });
  if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}: ${r.stderr.toString('utf8')}`);
  return r.stdout.toString('utf8');
}
