// The provisioner: from a `pending` sandbox row to a ready sandbox (spec: Life of a conversation,
// step 2), every backend call through packages/sandbox-client.
//
//   provision           create (adopt on 409) → row starting → callback key → env (decrypt,
//                       register, substitute) → env file → skills
//   warm                checkpoint_restore (failure: clear the environment's checkpoint id,
//                       stage failed, fall through to cold) → env file and skills again → network
//   cold                packages → network → clone → setup
//   then                runtime (the agent's CLI answers --version; waits for or installs it:
//                       runtime-probe.ts) → row ready
//
// Invariants:
// - Every secret value and the callback key are registered with the conversation's redactor
//   (env-file.ts) before anything of the env is written to the sandbox or to a log.
// - Each stage writes `started`, then `done` | `failed` | `interrupted` (with its duration)
//   through the conversation's LogWriter (stages.ts); stages with nothing to do write nothing. The output of
//   packages, clone and setup streams through the same writer as a turn's output (redacted).
// - Any failure destroys the backend sandbox (retried until the backend confirms it:
//   destroy-queue.ts), marks the sandbox row `failed` with a user-safe reason (redacted, like
//   every log line of a provisioning: redacted-logger.ts), revokes the callback key, and throws ProvisionError(stage, reason). The conversation
//   row is the caller's (engine.ts). Except when fenced off (StaleOwnerError): then nothing is
//   touched, since the sandbox and the key may be the new owner's.
// - Every sandbox row write is fenced by the owner's epoch: a stale owner changes nothing
//   (StaleOwnerError).
// - Network policy is applied on the warm path too: a checkpoint holds files, not the policy.
// - refreshEnv sends the network policy again with the env: the provider host it allows is the
//   host of the env's base URL (network.ts), so an env with another base URL needs another policy.
// - Client-side timeouts (spec rule 2): package install 300 s per command, clone 600 s, setup 120 s.
import type { SandboxClient } from '@paddock/sandbox-client';
import type { Db } from '../../db/database.ts';
import { findEnvironmentForProvisioning } from '../../environments/environments.repo.ts';
import type { RepoEntry } from '../../environments/environments.tables.ts';
import type { InferenceCredentialsService } from '../../inference-credentials/inference-credentials.service.ts';
import type { Logger } from '../../observability/logger.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import {
  type OwnerLease,
  ProvisionError,
  type Provisioned,
  type Provisioner,
  type ProvisionInput,
  StaleOwnerError,
} from '../contracts.ts';
import type { SandboxStatus } from '../conversations.tables.ts';
import { redactingLogger } from '../log/redacted-logger.ts';
import { recordCloneBases } from '../work/changes-turns.ts';
import type { CallbackKey, CallbackKeys } from './callback-key.ts';
import type { DestroyQueue } from './destroy-queue.ts';
import { watchEgressRefusals } from './egress-refusal.ts';
import { assembleEnv, ENV_FILE_PATH, renderEnvFile } from './env-file.ts';
import { networkPolicyFor, providerHostsFor } from './network.ts';
import { CLONE_TIMEOUT_MS, cloneRepo, repoDirName, repoDirs } from './repos.ts';
import { ensureRuntime, type LayerCliCache, type RuntimeProbeTimeouts } from './runtime-probe.ts';
import { runStreaming } from './sandbox-commands.ts';
import { createSessionStateStore } from './session-state.ts';
import { mountSkills } from './skills.ts';
import { runStage as runStageOnly, type StageObserver, type StageSink, toProvisionError } from './stages.ts';

/** One command of the `packages` stage (conversations/provisioning/packages.ts builds them). */
export interface PackageCommand {
  manager: string;
  argv: string[];
  env: Record<string, string>;
  user: 'root' | 'sandbox';
  timeoutMs: number;
}

export type PackagePlanner = (packages: Record<string, string>) => PackageCommand[];

export interface StageTimeouts {
  setupMs: number;
  cloneMs: number;
}

/** Spec, Sandbox interface rule 2: the setup script 30–120 s, a clone 600 s (repos.ts). */
export const DEFAULT_STAGE_TIMEOUTS: StageTimeouts = { setupMs: 120_000, cloneMs: CLONE_TIMEOUT_MS };

const SETUP_PATH = '/home/sandbox/.paddock/setup.sh';
const SETUP_RUNNER = 'if command -v bash >/dev/null 2>&1; then exec bash -e "$1"; else exec sh -e "$1"; fi';

export interface ProvisionerDeps {
  db: Db;
  secrets: Pick<SecretsService, 'decryptOwner' | 'sealBlob' | 'openBlob'>;
  /** The owner's inference credentials, injected under the variables the runtimes read. */
  inferenceCredentials: Pick<InferenceCredentialsService, 'forSandbox'>;
  callbackKeys: CallbackKeys;
  sandbox: SandboxClient;
  /** Every destroy of a sandbox: retried until the backend confirms it. */
  destroys: DestroyQueue;
  logger: Logger;
  /** The `packages` stage's commands; without one, an environment with packages fails that stage. */
  packagePlanner?: PackagePlanner;
  timeouts?: Partial<StageTimeouts>;
  /** Where source skills are cloned from (default https://github.com). */
  skillSourceBaseUrl?: string;
  /** Extra env for git in the sandbox (a private CA bundle: GIT_SSL_CAINFO). */
  gitEnv?: Record<string, string>;
  /** The runtime stage's probe, install and wait bounds (runtime-probe.ts). */
  runtimeTimeouts?: Partial<RuntimeProbeTimeouts>;
  /** Each stage's duration by outcome (absent: not measured). */
  metrics?: Pick<Metrics, 'provisioningStageDuration'>;
}

/** What provisioning reads of an environment. */
export interface EnvironmentRow {
  id: string;
  env_vars: Record<string, string>;
  packages: Record<string, string>;
  repos: RepoEntry[];
  setup_script: string | null;
  networking_type: 'unrestricted' | 'limited';
  networking_config: { allowed_hosts: string[] };
  checkpoint_id: string | null;
}

export function createProvisioner(deps: ProvisionerDeps): Provisioner & {
  /** The cold path on its own (environment checkpoint builds). */
  coldPath(input: ColdPathInput): Promise<void>;
} {
  const { db, sandbox, logger } = deps;
  const histogram = deps.metrics?.provisioningStageDuration;
  const observe: StageObserver | undefined = histogram
    ? (stage, outcome, seconds) => histogram.observe({ stage, outcome }, seconds)
    : undefined;
  /** runStage, every stage measured (stages.ts). */
  const runStage = <T>(
    sink: StageSink,
    stage: Parameters<typeof runStageOnly>[1],
    signal: AbortSignal | undefined,
    work: () => Promise<T>,
    log?: Logger,
  ): Promise<T> => runStageOnly(sink, stage, signal, work, log, observe);
  const timeouts: StageTimeouts = { ...DEFAULT_STAGE_TIMEOUTS, ...deps.timeouts };
  const sessions = createSessionStateStore({ db, sandbox, secrets: deps.secrets });
  /** The runtime layer's CLIs that answered `--version` already (runtime-probe.ts). */
  const layerCache: LayerCliCache = new Set();

  async function loadEnvironment(tenantId: string, id: string | null): Promise<EnvironmentRow | null> {
    if (!id) return null;
    const row = await findEnvironmentForProvisioning(db, tenantId, id);
    return row ?? null;
  }

  /** Moves the sandbox row, fenced by the owner's epoch. */
  async function markSandbox(
    lease: OwnerLease,
    sandboxId: string,
    status: SandboxStatus,
    from: SandboxStatus[],
    extra: { reason?: string; checkpoint_id?: string | null } = {},
  ): Promise<void> {
    const now = new Date();
    const res = await db
      .updateTable('sandboxes')
      .set({
        status,
        updated_at: now,
        ...(status === 'ready' ? { ready_at: now } : {}),
        ...(status === 'failed' || status === 'terminated' ? { ended_at: now } : {}),
        ...(extra.reason !== undefined ? { reason: extra.reason } : {}),
        ...(extra.checkpoint_id !== undefined ? { checkpoint_id: extra.checkpoint_id } : {}),
      })
      .where('id', '=', sandboxId)
      .where('tenant_id', '=', lease.tenantId)
      .where('status', 'in', from)
      .where(({ exists, selectFrom }) =>
        exists(
          selectFrom('conversations')
            .select('conversations.id')
            .whereRef('conversations.id', '=', 'sandboxes.conversation_id')
            .where('conversations.owner_epoch', '=', lease.epoch),
        ),
      )
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw new StaleOwnerError(lease.conversationId);
  }

  async function writeEnvFile(name: string, env: Record<string, string>): Promise<void> {
    await sandbox.writeFile(name, ENV_FILE_PATH, renderEnvFile(env), {
      mode: 0o600,
      mkdirParents: true,
      retry: true,
    });
  }

  async function assemble(input: ProvisionInput, environment: EnvironmentRow | null, callback: CallbackKey) {
    return await assembleEnv(
      { db, secrets: deps.secrets },
      {
        tenantId: input.lease.tenantId,
        conversationId: input.lease.conversationId,
        envVars: environment?.env_vars ?? {},
        environmentId: environment?.id ?? null,
        vaultId: input.vaultId,
        inferenceCredentials: await deps.inferenceCredentials.forSandbox(input.lease.tenantId, db),
        mcpServers: input.agent.mcpServers,
        callback: { key: callback.key, baseUrl: callback.baseUrl },
      },
      input.registry,
    );
  }

  async function placeFiles(input: ProvisionInput, env: Record<string, string>): Promise<void> {
    await writeEnvFile(input.sandboxName, env);
    await mountSkills(sandbox, input.sandboxName, {
      skills: input.agent.skills,
      skillsDir: input.adapter.skillsDir,
      writer: input.writer,
      signal: input.signal,
      ...(deps.skillSourceBaseUrl ? { sourceBaseUrl: deps.skillSourceBaseUrl } : {}),
      ...(deps.gitEnv ? { gitEnv: deps.gitEnv } : {}),
    });
  }

  async function applyNetwork(
    sink: StageSink,
    name: string,
    environment: EnvironmentRow,
    providerHosts: readonly string[],
    signal: AbortSignal | undefined,
    log: Logger,
  ) {
    const policy = networkPolicyFor(environment, providerHosts);
    if (!policy) return;
    await runStage(
      sink,
      'network',
      signal,
      async () => {
        await sandbox.setNetworkPolicy(name, policy, { retry: true });
      },
      log,
    );
  }

  async function coldPath(input: ColdPathInput): Promise<void> {
    const { sink, sandboxName: name, environment, env, signal, providerHosts = [] } = input;
    const log = input.logger ?? logger;
    const packages = environment.packages ?? {};
    if (Object.values(packages).some((spec) => spec.trim() !== '')) {
      await runStage(
        sink,
        'packages',
        signal,
        async () => {
          if (!deps.packagePlanner)
            throw new ProvisionError('packages', 'package installs are not available on this server');
          for (const command of deps.packagePlanner(packages)) {
            const refusals = watchEgressRefusals();
            const outcome = await runStreaming(
              sandbox,
              name,
              {
                argv: command.argv,
                env: { ...env, ...command.env },
                timeoutMs: command.timeoutMs,
                user: command.user,
              },
              {
                output: (stream, chunk) => {
                  refusals.feed(chunk);
                  sink.output(stream, chunk);
                },
              },
              signal,
            );
            if ('timedOut' in outcome) {
              throw new ProvisionError(
                'packages',
                `${command.manager} install did not finish within ${Math.round(command.timeoutMs / 1000)} s`,
              );
            }
            if (outcome.exitCode !== 0) {
              const hint = refusals.hint();
              throw new ProvisionError(
                'packages',
                `${command.manager} failed (exit ${outcome.exitCode})${hint ? `: ${hint}` : ''}; its output is in the conversation's log`,
              );
            }
          }
        },
        log,
      );
    }
    await applyNetwork(sink, name, environment, providerHosts, signal, log);
    if (environment.repos.length > 0) {
      await runStage(
        sink,
        'clone',
        signal,
        async () => {
          const dirs = repoDirs(environment.repos.map((repo) => repo.url));
          for (const [i, repo] of environment.repos.entries()) {
            const dir = dirs[i] ?? repoDirName(repo.url);
            let token: string | undefined;
            if (repo.token_secret !== undefined) {
              token = env[repo.token_secret];
              if (token === undefined) {
                throw new ProvisionError(
                  'clone',
                  `the token secret ${repo.token_secret} for ${repoDirName(repo.url)} is not set in the environment or the vault`,
                );
              }
            }
            await cloneRepo(
              sandbox,
              name,
              { url: repo.url, ref: repo.ref, token, dir: `/home/sandbox/${dir}` },
              {
                stage: 'clone',
                writer: sink,
                timeoutMs: timeouts.cloneMs,
                ...(deps.gitEnv ? { env: deps.gitEnv } : {}),
                ...(signal ? { signal } : {}),
              },
            );
          }
        },
        log,
      );
    }
    if (environment.setup_script && environment.setup_script.trim() !== '') {
      const script = environment.setup_script;
      await runStage(
        sink,
        'setup',
        signal,
        async () => {
          await sandbox.writeFile(name, SETUP_PATH, script, { mode: 0o700, mkdirParents: true, retry: true });
          const outcome = await runStreaming(
            sandbox,
            name,
            {
              argv: ['sh', '-c', SETUP_RUNNER, 'paddock-setup', SETUP_PATH],
              env,
              timeoutMs: timeouts.setupMs,
            },
            sink,
            signal,
          );
          if ('timedOut' in outcome) {
            throw new ProvisionError(
              'setup',
              `the setup script did not finish within ${Math.round(timeouts.setupMs / 1000)} s`,
            );
          }
          if (outcome.exitCode !== 0) {
            throw new ProvisionError(
              'setup',
              `the setup script failed (exit ${outcome.exitCode}); its output is in the conversation's log`,
            );
          }
        },
        log,
      );
    }
  }

  /** Warm path: true when the checkpoint was restored; on failure the environment's id is cleared. */
  async function tryRestore(
    input: ProvisionInput,
    environment: EnvironmentRow & { checkpoint_id: string },
    log: Logger,
  ) {
    const checkpointId = environment.checkpoint_id;
    try {
      await runStage(
        input.writer,
        'checkpoint_restore',
        input.signal,
        async () => {
          try {
            await sandbox.restoreCheckpoint(input.sandboxName, checkpointId, { retry: true });
          } catch (err) {
            log.warn(
              { err, checkpointId },
              'environment checkpoint restore failed; provisioning from scratch',
            );
            throw new ProvisionError(
              'checkpoint_restore',
              `the environment checkpoint could not be restored (${checkpointId}); it was cleared and the sandbox is provisioned from scratch`,
            );
          }
        },
        log,
      );
      return true;
    } catch (err) {
      if (input.signal.aborted || err instanceof StaleOwnerError) throw err;
      // Only the id that failed is cleared: a checkpoint built meanwhile stays.
      await db
        .updateTable('environments')
        .set({ checkpoint_id: null })
        .where('tenant_id', '=', input.lease.tenantId)
        .where('id', '=', environment.id)
        .where('checkpoint_id', '=', checkpointId)
        .execute();
      return false;
    }
  }

  async function fail(input: ProvisionInput, created: boolean, err: unknown): Promise<never> {
    const failure =
      err instanceof ProvisionError || err instanceof StaleOwnerError
        ? err
        : toProvisionError('provision', err, redactingLogger(logger, input.registry));
    // A fenced-off owner touches nothing more: the sandbox and the callback key may already be
    // the new owner's (it adopts the same sandbox name).
    if (failure instanceof StaleOwnerError) throw failure;
    if (created) await deps.destroys.destroy(input.lease.tenantId, input.sandboxName);
    await deps.callbackKeys.revoke(input.lease.conversationId).catch(() => {});
    const reason = input.registry.redact(`${failure.stage}: ${failure.message}`).toString('utf8');
    await markSandbox(input.lease, input.sandboxId, 'failed', ['pending', 'starting', 'ready'], {
      reason,
    }).catch(() => {});
    throw failure;
  }

  return {
    coldPath,

    async provision(input) {
      const { lease } = input;
      const log = redactingLogger(logger, input.registry);
      let created = false;
      try {
        const { environment, assembled, callback } = await runStage(
          input.writer,
          'provision',
          input.signal,
          async () => {
            // The environment is read beside the row's move (one round trip less); the backend is
            // called only after the move, so that a fenced-off owner creates nothing.
            const [environment] = await Promise.all([
              loadEnvironment(lease.tenantId, input.agent.environmentId),
              markSandbox(lease, input.sandboxId, 'starting', ['pending']),
            ]);
            // The backend creates the sandbox while the key is minted and the env assembled (they
            // do not depend on each other). Both settle before anything else happens, so a failure
            // of one never leaves the other running behind fail() (which revokes the keys).
            const [made, keyed] = await Promise.allSettled([
              sandbox.create(input.sandboxName),
              (async () => {
                const callback = await deps.callbackKeys.mint(lease.tenantId, lease.conversationId);
                return { callback, assembled: await assemble(input, environment, callback) };
              })(),
            ]);
            if (made.status === 'fulfilled') created = true;
            else throw made.reason;
            if (keyed.status === 'rejected') throw keyed.reason;
            const { assembled, callback } = keyed.value;
            // With a checkpoint the files are placed after the restore (it replaces the writable
            // layer): placing them now as well would be one more round of writes before the turn.
            if (!environment?.checkpoint_id) await placeFiles(input, assembled.env);
            return { environment, assembled, callback };
          },
          log,
        );
        let path: Provisioned['path'] = 'cold';
        if (environment?.checkpoint_id) {
          const restored = await tryRestore(
            input,
            {
              ...environment,
              checkpoint_id: environment.checkpoint_id,
            },
            log,
          );
          // A restore replaces the writable layer (also a failed one may have): files now.
          await placeFiles(input, assembled.env);
          if (restored) path = 'warm';
        }
        if (environment) {
          const providerHosts = providerHostsFor(input.agent, assembled.env);
          if (path === 'warm')
            await applyNetwork(
              input.writer,
              input.sandboxName,
              environment,
              providerHosts,
              input.signal,
              log,
            );
          else
            await coldPath({
              sink: input.writer,
              sandboxName: input.sandboxName,
              environment,
              env: assembled.env,
              providerHosts,
              signal: input.signal,
              logger: log,
            });
        }
        // The base of every cloned repository (Changes: work/changes-turns.ts; written the first
        // time only) and where this sandbox's first turn starts from.
        {
          const repos = environment?.repos ?? [];
          const dirs = repoDirs(repos.map((repo) => repo.url));
          await recordCloneBases(
            { db, sandbox },
            {
              tenantId: lease.tenantId,
              conversationId: lease.conversationId,
              sandboxName: input.sandboxName,
              repos: repos.map((repo, n) => ({ dir: dirs[n] ?? '', url: repo.url })),
            },
          ).catch((err: unknown) => log.warn({ err }, "recording the cloned repositories' bases failed"));
        }
        // Last: the backend's runtime layer had the whole cold path to finish installing, and a warm
        // restore (which replaces the writable layer) cannot take an in-sandbox install away.
        const cli = input.adapter.cli;
        if (cli) {
          await runStage(
            input.writer,
            'runtime',
            input.signal,
            () =>
              ensureRuntime({
                sandbox,
                name: input.sandboxName,
                cli,
                env: assembled.env,
                sink: input.writer,
                signal: input.signal,
                layerCache,
                ...(deps.runtimeTimeouts ? { timeouts: deps.runtimeTimeouts } : {}),
              }),
            log,
          );
        }
        await markSandbox(lease, input.sandboxId, 'ready', ['starting'], {
          checkpoint_id: path === 'warm' ? (environment?.checkpoint_id ?? null) : null,
        });
        return {
          env: assembled.env,
          mcpServers: assembled.mcpServers,
          callback,
          path,
        };
      } catch (err) {
        return await fail(input, created, err);
      }
    },

    async refreshEnv(input, kept) {
      const environment = await loadEnvironment(input.lease.tenantId, input.agent.environmentId);
      const callback =
        kept ?? (await deps.callbackKeys.mint(input.lease.tenantId, input.lease.conversationId));
      const assembled = await assemble(input, environment, callback);
      await writeEnvFile(input.sandboxName, assembled.env);
      // The provider host follows the env: a base URL set or changed since the sandbox's policy
      // was sent is otherwise denied by a `limited` environment at the next turn.
      const policy = environment
        ? networkPolicyFor(environment, providerHostsFor(input.agent, assembled.env))
        : null;
      if (policy) await sandbox.setNetworkPolicy(input.sandboxName, policy, { retry: true });
      return {
        env: assembled.env,
        mcpServers: assembled.mcpServers,
        callback,
        path: 'warm',
      };
    },

    async saveSession(input) {
      await sessions.save({
        lease: input.lease,
        sandboxName: input.sandboxName,
        sessionPaths: input.adapter.sessionPaths,
        ...(input.signal ? { signal: input.signal } : {}),
      });
    },

    async restoreSession(input) {
      return await sessions.restore({ lease: input.lease, sandboxName: input.sandboxName });
    },
  };
}

export interface ColdPathInput {
  sink: StageSink;
  sandboxName: string;
  environment: EnvironmentRow;
  env: Record<string, string>;
  /** Inference provider hosts a `limited` environment allows besides its own (network.ts). */
  providerHosts?: readonly string[];
  signal?: AbortSignal;
  /** Where a stage's unexpected failure is logged (a conversation's redacting logger); the server's by default. */
  logger?: Logger;
}
