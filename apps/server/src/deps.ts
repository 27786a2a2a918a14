// Wiring happens here and only here. Services are factories taking their dependencies
// explicitly; tests build the same graph with a test database.
import { hostname } from 'node:os';
import { createSandboxClient, type SandboxClient } from '@paddock/sandbox-client';
import type { FastifyRequest } from 'fastify';
import { BUILD_EXPORT_TASK, createBuildExportTask } from './account-exports/account-exports.build.ts';
import {
  type AccountExportsService,
  createAccountExportsService,
} from './account-exports/account-exports.service.ts';
import { type AccountDeletion, createAccountDeletion } from './accounts/account-deletion.ts';
import { createAccountMailTask } from './accounts/accounts.notifications.ts';
import { type AccountsService, createAccountsService } from './accounts/accounts.service.ts';
import { type AdminService, createAdminService } from './admin/admin.service.ts';
import { type AgentsService, createAgentsService } from './agents/agents.service.ts';
import { type ApplyService, createApplyService } from './apply/apply.service.ts';
import { createExportService, type ExportService } from './apply/export.service.ts';
import { type AuditService, createAuditService } from './audit/audit.service.ts';
import { type ApiKeysService, createApiKeysService } from './auth/api-keys.service.ts';
import type { Principal, PrincipalCache } from './auth/principal.ts';
import { createPrincipalCache } from './auth/principal-cache.ts';
import { createSessionsService, type SessionsService } from './auth/sessions.service.ts';
import { type BillingService, createBillingService } from './billing/billing.service.ts';
import { BILLING_MAIL_TASK, createBillingMailTask } from './billing/billing-mail.ts';
import { createSubscriptionGate } from './billing/gate.ts';
import { type BillingProcessor, createStripeProcessor } from './billing/stripe.ts';
import type { Config } from './config/config.ts';
import {
  type ConversationsService,
  createConversationsService,
  sandboxName,
} from './conversations/api/conversations.service.ts';
import { createGates, type SubscriptionGate } from './conversations/api/gates.ts';
import { createSandboxKeyRule, type SandboxKeyRule } from './conversations/api/sandbox-key.ts';
import { logEventFrameParts, type StreamOptions } from './conversations/api/stream.routes.ts';
import type {
  LogWriterFactory,
  OwnershipProbe,
  Provisioner,
  RuntimeRegistry,
} from './conversations/contracts.ts';
import { type ConversationEngine, createEngine } from './conversations/engine/engine.ts';
import {
  DEFAULT_PROVISION_DEADLINE_MS,
  DEFAULT_TICK_MS,
  type LifecycleOptions,
} from './conversations/engine/lifecycle.ts';
import { createOwnership, type Ownership } from './conversations/engine/owner.ts';
import { createFeed, type PgFeed } from './conversations/log/feed.ts';
import { isConversationLocked } from './conversations/log/log-events.repo.ts';
import { createLogTails, type LogTails } from './conversations/log/log-tail.ts';
import { createLogWriterFactory } from './conversations/log/log-writer.ts';
import { createCallbackKeys } from './conversations/provisioning/callback-key.ts';
import { createDestroyQueue, type DestroyQueue } from './conversations/provisioning/destroy-queue.ts';
import { packageCommands } from './conversations/provisioning/packages.ts';
import { createProvisioner } from './conversations/provisioning/provisioner.ts';
import { defaultRuntimes } from './conversations/turns/runtimes/registry.ts';
import { type ChangesService, createChangesService } from './conversations/work/changes.ts';
import { createTurnChangesRecorder } from './conversations/work/changes-turns.ts';
import { createPushService, type PushService } from './conversations/work/push.service.ts';
import { createTerminals, type Terminals } from './conversations/work/terminal.ts';
import { type DatabaseHandle, type Db, poolOptions } from './db/database.ts';
import {
  createEnvironmentCheckpoints,
  type EnvironmentCheckpoints,
} from './environments/environment-checkpoint.ts';
import { createEnvironmentsService, type EnvironmentsService } from './environments/environments.service.ts';
import {
  createInferenceCredentialsService,
  type InferenceCredentialsService,
} from './inference-credentials/inference-credentials.service.ts';
import { createGatewayReach, sandboxdOnThisHost } from './inference-credentials/reach.ts';
import type { TaskList } from './jobs/worker.ts';
import { ACCOUNT_MAIL_TASK, createMailQueue, type MailQueue } from './mail/mail.queue.ts';
import { createMailer, type Mailer } from './mail/mailer.ts';
import { readLiveCounts } from './observability/live-counts.ts';
import type { Logger } from './observability/logger.ts';
import type { Metrics } from './observability/metrics.ts';
import { traceSandboxClient } from './observability/tracing.ts';
import { createSecretsService, type SecretsService } from './secrets/secrets.service.ts';
import { createUsageService, type UsageService } from './usage/usage.service.ts';
import { createVaultsService, type VaultsService } from './vaults/vaults.service.ts';

export interface HealthService {
  databaseOk(): Promise<boolean>;
}

export interface Deps {
  version: string;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  database: DatabaseHandle;
  db: Db;
  health: HealthService;
  audit: AuditService;
  accounts: AccountsService;
  /** The one deletion path of an account (the person's, an admin's, the unverified pruner's). */
  accountDeletion: AccountDeletion;
  apiKeys: ApiKeysService;
  sessions: SessionsService;
  mailer: Mailer;
  mailQueue: MailQueue;
  /** graphile-worker task handlers, run by the in-process job runner (src/jobs/worker.ts). */
  jobTasks: TaskList;
  secrets: SecretsService;
  /** The account's inference provider keys (write-only; injected into its sandboxes). */
  inferenceCredentials: InferenceCredentialsService;
  environments: EnvironmentsService;
  vaults: VaultsService;
  agents: AgentsService;
  apply: ApplyService;
  exporter: ExportService;
  /** Data exports of an account (docs/data-export.md), built by the BUILD_EXPORT_TASK job. */
  accountExports: AccountExportsService;
  admin: AdminService;
  usage: UsageService;
  /** Billing (BILLING_ENABLED only; absent when off, so no billing route or state exists). */
  billing?: BillingService;
  conversations: ConversationsService;
  /** Push a branch and open a pull request from a conversation's live sandbox (conversations/work/). */
  pushes: PushService;
  /** The agent's changes in the sandbox's repositories (conversations/work/changes.ts). */
  changes: ChangesService;
  /** What a sandbox's conversation-scoped key may do under /api/conversations (sandbox-key.ts). */
  sandboxKey: SandboxKeyRule;
  /** Builds environment checkpoints (POST /api/environments/:id/checkpoint). */
  environmentCheckpoints: EnvironmentCheckpoints;
  /** This process's conversation servers, command bus and lifecycle clock (start() at boot). */
  conversationEngine: ConversationEngine;
  /** Who owns which conversation in this process (owner.ts). */
  ownership: Ownership;
  /** The sandbox backend (SANDBOX_API_URL), as the engine uses it. */
  sandbox: SandboxClient;
  /** Backend destroys that are retried until confirmed (destroy-queue.ts). */
  destroys: DestroyQueue;
  /** The bounds every conversation server enforces; the sandbox reaper applies the same. */
  lifecycle: LifecycleOptions;
  /** Credential resolvers tried after the bearer API key (e.g. the browser session cookie). */
  authResolvers: ReadonlyArray<(request: FastifyRequest) => Promise<Principal | null>>;
  /** Resolved API keys, cached for 2 s per process (auth/principal-cache.ts). */
  principals: PrincipalCache;
  /** Conversation log wake-ups across processes (one LISTEN connection, opened on first use). */
  feed: PgFeed;
  /** The single log writer of each owned conversation. */
  logWriters: LogWriterFactory;
  /** The shared tail of each conversation with live viewers in this process (log-tail.ts). */
  logTails: LogTails;
  /** Whether any process owns a conversation now (log streams tell viewers when none does). */
  ownershipProbe: OwnershipProbe;
  /** Heartbeat interval of the log streams; read per request (tests shorten it). */
  streamOptions: StreamOptions;
  /** This process's open terminals into sandboxes, their bounds and beat (conversations/work/terminal.ts). */
  terminals: Terminals;
}

export interface CreateDepsInput {
  version: string;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  database: DatabaseHandle;
  /** Conversation engine parts a test or a deployment replaces (defaults: the real ones). */
  engine?: EngineOptions;
}

export interface EngineOptions {
  runtimes?: RuntimeRegistry;
  provisioner?: Provisioner;
  subscription?: SubscriptionGate;
  /** The payment processor billing talks to (default: the Stripe SDK per BILLING_STRIPE_*). */
  billingProcessor?: BillingProcessor;
  /** Lifecycle tick, provision deadline (defaults 60 s, 30 min); bounds from config. */
  lifecycle?: Partial<LifecycleOptions>;
  /** Extra env for git in the sandbox (tests: a fake git host's self-signed certificate). */
  gitEnv?: Record<string, string>;
}

const READY_TIMEOUT_MS = 2500;

export function createHealthService(database: DatabaseHandle): HealthService {
  return {
    async databaseOk() {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS);
      });
      const probe = database.pool.query('SELECT 1').then(
        () => true,
        () => false,
      );
      try {
        return await Promise.race([probe, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export function createDeps(input: CreateDepsInput): Deps {
  const db = input.database.db;
  const health = createHealthService(input.database);
  input.metrics.setScrapeSources({ live: () => readLiveCounts(db), ready: () => health.databaseOk() });
  const audit = createAuditService({ db, logger: input.logger, metrics: input.metrics });
  const { masterSecretsKey, masterSecretsKeyPrevious } = input.config;
  // loadConfig always resolves a master key (production requires one; development keeps one
  // in the data directory), so its absence here is a wiring bug, not a configuration problem.
  if (!masterSecretsKey)
    throw new Error('createDeps: config.masterSecretsKey is not resolved (use loadConfig)');
  const secrets = createSecretsService({
    db,
    logger: input.logger,
    audit,
    masterKey: masterSecretsKey,
    previousMasterKey: masterSecretsKeyPrevious,
  });
  const inferenceCredentials = createInferenceCredentialsService({
    db,
    secrets,
    audit,
    reach: createGatewayReach(input.config.sandbox.reach, {
      sandboxdOnThisHost: sandboxdOnThisHost(input.config.sandbox.baseUrl),
    }),
  });
  const environments = createEnvironmentsService({ db, secrets, audit });
  const vaults = createVaultsService({ db, secrets, audit });
  const agents = createAgentsService({ db, audit });
  const exporter = createExportService({ secrets, environments, vaults, agents });
  const principals = createPrincipalCache();
  const billing = input.config.billing.enabled
    ? createBillingService({
        db,
        config: input.config,
        processor: input.engine?.billingProcessor ?? createStripeProcessor(input.config, input.logger),
        audit,
      })
    : undefined;
  const accountsDeps = createAccountsDeps({ ...input, db, audit, secrets, principals, billing });
  const conversationLog = createConversationLogDeps(input);
  const subscription =
    input.engine?.subscription ??
    (billing ? createSubscriptionGate({ db, publicUrl: input.config.publicUrl }) : undefined);
  const conversationDeps = createConversationDeps(input, subscription, {
    apiKeys: accountsDeps.apiKeys,
    secrets,
    inferenceCredentials,
    environments,
    log: conversationLog,
    audit,
  });
  const accountDeletion = createAccountDeletion({
    db,
    audit,
    mailQueue: accountsDeps.mailQueue,
    principals,
    conversations: conversationDeps.conversations,
    // The subscription is canceled at the processor before anything is deleted.
    hooks: billing ? [{ name: 'billing', beforeDelete: (userId) => billing.cancelForDeletion(userId) }] : [],
  });
  return {
    ...conversationDeps,
    ...input,
    accountDeletion,
    db,
    health,
    audit,
    secrets,
    inferenceCredentials,
    environments,
    vaults,
    agents,
    apply: createApplyService({ db, logger: input.logger, audit, secrets, environments, vaults, agents }),
    exporter,
    accountExports: createAccountExportsService({ db, audit }),
    admin: createAdminService({ db, audit }),
    usage: createUsageService({ db, audit }),
    ...(billing ? { billing } : {}),
    ...accountsDeps,
    jobTasks: {
      ...accountsDeps.jobTasks,
      [BUILD_EXPORT_TASK]: createBuildExportTask({
        db,
        pool: {
          ...poolOptions(input.config, input.database.url),
          connectionString: input.database.url,
        },
        exporter,
        mailQueue: accountsDeps.mailQueue,
        logger: input.logger,
      }),
    },
    authResolvers: [(request) => accountsDeps.sessions.resolve(request)],
    principals,
    ...conversationLog,
  };
}

function createConversationLogDeps(
  input: CreateDepsInput,
): Pick<Deps, 'feed' | 'logWriters' | 'logTails' | 'ownershipProbe' | 'streamOptions' | 'terminals'> {
  const { pool, url } = input.database;
  const { ssl, connectionTimeoutMillis, keepAlive } = poolOptions(input.config, url);
  const feed = createFeed({
    pool,
    clientConfig: { connectionString: url, ssl, connectionTimeoutMillis, keepAlive },
    logger: input.logger,
  });
  const logWriters = createLogWriterFactory({
    pool,
    feed,
    logger: input.logger,
    outputBudgetMb: input.config.logOutputBudgetMb,
    metrics: input.metrics,
  });
  return {
    feed,
    logWriters,
    logTails: createLogTails({
      db: input.database.db,
      feed,
      logger: input.logger,
      frame: logEventFrameParts,
    }),
    ownershipProbe: { isOwned: (conversationId) => isConversationLocked(pool, conversationId) },
    streamOptions: { heartbeatMs: 15_000 },
    terminals: createTerminals(),
  };
}

function createAccountsDeps(
  input: CreateDepsInput & {
    db: Db;
    audit: AuditService;
    secrets: SecretsService;
    principals: PrincipalCache;
    billing: BillingService | undefined;
  },
) {
  const { db, config, audit, logger, secrets, principals, billing } = input;
  const mailer = createMailer(config, logger);
  const mailQueue = createMailQueue({ config });
  const sessions = createSessionsService({ db, config });
  const apiKeys = createApiKeysService({ db, audit, principals });
  const accounts = createAccountsService({
    db,
    config,
    audit,
    mailQueue,
    sessions,
    apiKeys,
    principals,
    tenantKeys: secrets,
    ...(billing ? { trials: billing } : {}),
  });
  const jobTasks: TaskList = {
    [ACCOUNT_MAIL_TASK]: createAccountMailTask({ db, config, mailer, mailQueue, audit, logger }),
    [BILLING_MAIL_TASK]: createBillingMailTask({ db, config, mailer, logger }),
  };
  return { accounts, apiKeys, sessions, mailer, mailQueue, jobTasks };
}

function createConversationDeps(
  input: CreateDepsInput,
  subscription: SubscriptionGate | undefined,
  parts: {
    apiKeys: ApiKeysService;
    secrets: SecretsService;
    inferenceCredentials: InferenceCredentialsService;
    environments: EnvironmentsService;
    log: Pick<Deps, 'feed' | 'logWriters'>;
    audit: AuditService;
  },
) {
  const { apiKeys, secrets, inferenceCredentials, environments, log } = parts;
  const { config, logger, database } = input;
  const db = database.db;
  const options = input.engine ?? {};
  const sandboxBaseUrl = config.sandbox.baseUrl ?? 'http://127.0.0.1:9';
  // Each call a span when tracing is on (observability/tracing.ts); otherwise the client itself.
  const sandbox = traceSandboxClient(
    createSandboxClient({
      // Unconfigured: every conversation fails to provision with a clear reason (docs/configuration.md).
      baseUrl: sandboxBaseUrl,
      token: config.sandbox.token ?? 'unconfigured',
      timeoutMs: config.sandbox.timeoutMs,
      logger,
    }),
    sandboxBaseUrl,
  );
  const { feed, logWriters } = log;
  const destroys = createDestroyQueue({ db, sandbox, logger });
  const provisioner = createProvisioner({
    db,
    secrets,
    inferenceCredentials,
    callbackKeys: createCallbackKeys({ apiKeys, callbackUrl: config.sandbox.callbackUrl }),
    sandbox,
    destroys,
    logger,
    packagePlanner: packageCommands,
    metrics: input.metrics,
    ...(options.gitEnv ? { gitEnv: options.gitEnv } : {}),
  });
  const environmentCheckpoints = createEnvironmentCheckpoints({
    db,
    sandbox,
    secrets,
    environments,
    coldPath: provisioner.coldPath,
    destroys,
    logger,
  });
  const gates = createGates({
    db,
    maxSandboxesPerUser: config.sandbox.maxConcurrentPerUser,
    ...(subscription ? { subscription } : {}),
  });
  const ownership = createOwnership({
    pool: database.pool,
    node: `${hostname()}:${process.pid}`,
    logger,
    leaseSeconds: config.ownerLeaseSeconds,
  });
  const lifecycle = {
    tickMs: DEFAULT_TICK_MS,
    provisionDeadlineMs: DEFAULT_PROVISION_DEADLINE_MS,
    idleTimeoutMinutes: config.sandbox.idleTimeoutMinutes,
    maxLifetimeHours: config.sandbox.maxLifetimeHours,
    ...options.lifecycle,
  };
  const conversationEngine = createEngine({
    db,
    pool: database.pool,
    sandbox,
    destroys,
    ownership,
    feed,
    gates,
    logger,
    runtimes: options.runtimes ?? defaultRuntimes,
    writers: logWriters,
    provisioner: options.provisioner ?? provisioner,
    revokeCallbackKeys: (conversationId) => apiKeys.revokeConversationKeys(conversationId),
    newSandboxName: sandboxName,
    lifecycle,
    metrics: input.metrics,
    changes: createTurnChangesRecorder({ db, sandbox }),
  });
  const sandboxKey = createSandboxKeyRule({ db });
  const changes = createChangesService({ db, sandbox, secrets, inferenceCredentials });
  const conversations = createConversationsService({
    db,
    gates,
    sandboxKey,
    engine: conversationEngine,
    logger,
    bounds: lifecycle,
    lineage: { db, secrets },
    inferenceCredentials,
  });
  const pushes = createPushService({
    db,
    sandbox,
    secrets,
    inferenceCredentials,
    audit: parts.audit,
    gitHosts: config.gitHosts,
    publicUrl: config.publicUrl,
    logger,
    ...(options.gitEnv ? { gitEnv: options.gitEnv } : {}),
  });
  return {
    conversations,
    pushes,
    changes,
    sandboxKey,
    conversationEngine,
    ownership,
    environmentCheckpoints,
    sandbox,
    destroys,
    lifecycle,
  };
}
