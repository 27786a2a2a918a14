// "Push a branch" and "open a pull request" (issue 41, deliverable 4): from the conversation's
// live sandbox to the environment repository's remote, on any replica (the sandbox row says
// where; the owner is not involved).
//
// What must hold (test/conversations.push.test.ts):
// - Tenant-scoped: another tenant's conversation answers 404 like a missing one; every row read
//   and written carries the tenant. The route refuses a sandbox key (push.routes.ts).
// - A live sandbox (row `ready`) or 409 `sandbox_not_running` saying how to wake it; a turn
//   running or queued: 409 `conversation_busy` (its work is not finished).
// - The token is the environment repository's `token_secret` (env_vars, then the environment's
//   secrets, then the vault's: the sandbox's own layering). None: 422 `push_token_missing`.
// - Every text that reaches a response, an audit row or a log line passes a redactor holding the
//   conversation's secret values (its lineage's environment and vault secrets, the account's
//   inference keys) and the token: git's and the provider's words, the default commit message
//   and pull request text.
// - Refusals say what to do: branch exists (409 `branch_exists`), protected branch or hook
//   (409 `push_rejected`, the remote's words), token refused (422 `push_auth_failed`), the
//   provider's refusal (422 `pull_request_refused`) or silence (502 `pull_request_failed`),
//   anything else git reports (502 `push_failed`). Never a 500 for what git or a provider says.
// - A pull request that already exists for the branch is returned (and stored), not an error.
// - One push of a conversation at a time in a process (409 `conflict`): two would race on the
//   repository's index; across replicas git's index.lock refuses the second (502 `push_failed`).
// - Audited: `conversation.pushed` (repository directory, branch, commit), and
//   `conversation.pull_request.opened` (provider, number, URL); never a token or a message.
import type { SandboxClient } from '@paddock/sandbox-client';
import { v7 as uuidv7 } from 'uuid';
import type { AuditEntry, AuditService } from '../../audit/audit.service.ts';
import type { Db } from '../../db/database.ts';
import type { RepoEntry } from '../../environments/environments.tables.ts';
import { AppError } from '../../http/errors.ts';
import type { InferenceCredentialsService } from '../../inference-credentials/inference-credentials.service.ts';
import type { Logger } from '../../observability/logger.ts';
import { isUuid } from '../../resources/fields.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import { createSecretRegistry, type SecretRegistry } from '../log/redactor.ts';
import { lineageSecretValues } from '../provisioning/lineage-secrets.ts';
import { repoDirs } from '../provisioning/repos.ts';
import { branchNameProblem, commitSubject, defaultBranchName } from './push-branch.ts';
import { COMMIT_EXIT, commitInSandbox, pushFromSandbox, quoteOutput } from './push-git.ts';
import {
  type GitHostsConfig,
  type OpenedPullRequest,
  openPullRequest,
  type Provider,
  PullRequestError,
  remoteTarget,
} from './push-providers.ts';

export interface PushInput {
  repo?: string | undefined;
  branch?: string | undefined;
  message?: string | undefined;
  pull_request?:
    | boolean
    | { title?: string | undefined; body?: string | undefined; base?: string | undefined }
    | undefined;
}

export interface PushView {
  repo: string;
  branch: string;
  commit: string;
  committed: boolean;
  /** The remote, origin and path only. */
  remote: string;
}

export interface PullRequestView {
  repo: string;
  branch: string;
  provider: Provider;
  number: number;
  url: string;
  created_at: string;
}

export interface PushResult {
  push: PushView;
  pull_request: (PullRequestView & { created: boolean; base: string }) | null;
}

export interface PushContext {
  tenantId: string;
  actor: AuditEntry['actor'];
  ip: string | null;
}

/** What a push would do by default (GET …/push): the console's dialog is prefilled with it. */
export interface PushPlan {
  repos: { repo: string; remote: string; has_token: boolean; branch: string }[];
  message: string;
  /** Whether a push can run now (a live sandbox, no turn running); `reason` says why not. */
  ready: boolean;
  reason: string | null;
}

export interface PushService {
  push(ctx: PushContext, conversationId: string, input: PushInput): Promise<PushResult>;
  plan(tenantId: string, conversationId: string): Promise<PushPlan>;
}

/** Who commits: the account's email as author, Paddock as committer (docs/conversations.md). */
const COMMITTER = { name: 'Paddock', email: 'paddock@users.noreply.paddock.invalid' };

const WAKE_HINT =
  'send a prompt to wake it (POST /api/conversations/:id/prompts, `paddock run`, or the prompt box in the console), then push';

export function createPushService(deps: {
  db: Db;
  sandbox: SandboxClient;
  secrets: Pick<SecretsService, 'decryptOwner'>;
  inferenceCredentials: Pick<InferenceCredentialsService, 'forSandbox'>;
  audit: AuditService;
  gitHosts: GitHostsConfig;
  /** The console's origin: the conversation's link in the pull request's body. */
  publicUrl: URL;
  /** Extra env for git in the sandbox (a private CA: GIT_SSL_CAINFO), as for clones. */
  gitEnv?: Record<string, string>;
  logger: Logger;
}): PushService {
  const { db } = deps;
  const gitEnv = deps.gitEnv ?? {};
  const inFlight = new Set<string>();

  async function registryFor(
    tenantId: string,
    conversationId: string,
    token: string,
  ): Promise<SecretRegistry> {
    const registry = createSecretRegistry();
    const lineage = await lineageSecretValues(deps, tenantId, conversationId, { self: true });
    const keys = (await deps.inferenceCredentials.forSandbox(tenantId, db)).map((c) => c.apiKey);
    registry.registerAll([...lineage, ...keys, token]);
    return registry;
  }

  async function tokenFor(
    tenantId: string,
    repo: RepoEntry,
    dir: string,
    environment: { id: string; env_vars: Record<string, string> },
    vaultId: string | null,
  ): Promise<string> {
    const missing = (why: string) =>
      new AppError(
        'push_token_missing',
        `${why}: add an access token to the environment's repository (store it as a secret of the environment or the vault and name it in the repository's token_secret); it needs contents:write, and pull_requests:write to open pull requests`,
        { extra: { repo: dir } },
      );
    if (repo.token_secret === undefined) throw missing(`the repository ${dir} has no access token`);
    const layers = {
      ...environment.env_vars,
      ...(await deps.secrets.decryptOwner(tenantId, { kind: 'environment', id: environment.id }, db)),
      ...(vaultId ? await deps.secrets.decryptOwner(tenantId, { kind: 'vault', id: vaultId }, db) : {}),
    };
    const token = layers[repo.token_secret];
    if (token === undefined || token === '')
      throw missing(
        `the token secret ${repo.token_secret} of ${dir} is not set in the environment or the vault`,
      );
    return token;
  }

  async function findConversation(tenantId: string, conversationId: string) {
    const conversation = isUuid(conversationId)
      ? await db
          .selectFrom('conversations')
          .select(['id', 'status', 'title', 'agent_id', 'vault_id'])
          .where('tenant_id', '=', tenantId)
          .where('id', '=', conversationId)
          .executeTakeFirst()
      : undefined;
    if (!conversation) throw AppError.notFound('conversation');
    return conversation;
  }

  /** Why a push cannot run now (as the AppError it answers), or the live sandbox. */
  async function liveSandbox(tenantId: string, conversation: { id: string; status: string }) {
    if (conversation.status === 'terminated')
      return new AppError(
        'conversation_terminated',
        'the conversation is terminated: its sandbox is gone, so there is nothing to push',
      );
    if (conversation.status === 'running' || conversation.status === 'pending')
      return new AppError(
        'conversation_busy',
        "a turn is queued or running: wait for it to end (or interrupt it), then push the agent's work",
      );
    const sandbox = await db
      .selectFrom('sandboxes')
      .select(['id', 'name', 'status'])
      .where('tenant_id', '=', tenantId)
      .where('conversation_id', '=', conversation.id)
      .where('status', '=', 'ready')
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
    if (!sandbox)
      return new AppError('sandbox_not_running', `the conversation's sandbox is not running: ${WAKE_HINT}`);
    return sandbox;
  }

  /** The environment's repositories with their directories (empty: none, or no environment). */
  async function reposOf(tenantId: string, conversation: { agent_id: string | null }) {
    const agent = conversation.agent_id
      ? await db
          .selectFrom('agents')
          .select(['environment_id'])
          .where('tenant_id', '=', tenantId)
          .where('id', '=', conversation.agent_id)
          .executeTakeFirst()
      : undefined;
    const environment = agent?.environment_id
      ? await db
          .selectFrom('environments')
          .select(['id', 'env_vars', 'repos'])
          .where('tenant_id', '=', tenantId)
          .where('id', '=', agent.environment_id)
          .executeTakeFirst()
      : undefined;
    const repos = environment?.repos ?? [];
    return { environment, repos, dirs: repoDirs(repos.map((r) => r.url)) };
  }

  /** The branch this sandbox pushed last for the repository (an update), else a new default name. */
  async function defaultBranch(
    tenantId: string,
    conversationId: string,
    dir: string,
    sandboxId: string | null,
  ) {
    const pushed = await db
      .selectFrom('conversation_pushes')
      .select(['branch', 'sandbox_id'])
      .where('tenant_id', '=', tenantId)
      .where('conversation_id', '=', conversationId)
      .where('repo_dir', '=', dir)
      .orderBy('created_at', 'desc')
      .execute();
    if (sandboxId !== null && pushed[0]?.sandbox_id === sandboxId) return pushed[0].branch;
    const taken = new Set(pushed.map((p) => p.branch));
    let n = 1;
    while (taken.has(defaultBranchName(conversationId, n))) n++;
    return defaultBranchName(conversationId, n);
  }

  const linkOf = (conversationId: string) =>
    new URL(`/conversations/${conversationId}`, deps.publicUrl).toString();

  /** The latest prompt's first line and the conversation's link (redacted by the caller). */
  async function defaultMessage(tenantId: string, conversation: { id: string; title: string }) {
    const latest = await db
      .selectFrom('turns')
      .select(['prompt'])
      .where('tenant_id', '=', tenantId)
      .where('conversation_id', '=', conversation.id)
      .orderBy('seq', 'desc')
      .executeTakeFirst();
    return `${commitSubject(latest?.prompt ?? conversation.title)}\n\nPaddock conversation: ${linkOf(conversation.id)}\n`;
  }

  return {
    async plan(tenantId, conversationId) {
      const conversation = await findConversation(tenantId, conversationId);
      const live = await liveSandbox(tenantId, conversation);
      const sandboxId = live instanceof AppError ? null : live.id;
      const { repos, dirs } = await reposOf(tenantId, conversation);
      const registry = createSecretRegistry();
      registry.registerAll(await lineageSecretValues(deps, tenantId, conversation.id, { self: true }));
      const out: PushPlan['repos'] = [];
      for (const [i, repo] of repos.entries()) {
        const dir = dirs[i] as string;
        out.push({
          repo: dir,
          remote: safeUrl(repo.url),
          has_token: repo.token_secret !== undefined,
          branch: await defaultBranch(tenantId, conversation.id, dir, sandboxId),
        });
      }
      const reason =
        live instanceof AppError
          ? live.message
          : repos.length === 0
            ? "the conversation's environment clones no repository: there is no remote to push to"
            : null;
      return {
        repos: out,
        message: registry.redact(await defaultMessage(tenantId, conversation)).toString('utf8'),
        ready: reason === null,
        reason,
      };
    },

    async push(ctx, conversationId, input) {
      const conversation = await findConversation(ctx.tenantId, conversationId);
      // One push of a conversation at a time in this process: two would race on the repository's
      // index. (Across replicas git's own index.lock refuses the second: 502 push_failed.)
      if (inFlight.has(conversation.id))
        throw new AppError('conflict', 'a push of this conversation is under way: wait for it to finish');
      inFlight.add(conversation.id);
      try {
        return await pushNow(ctx, conversation, input);
      } finally {
        inFlight.delete(conversation.id);
      }
    },
  };

  async function pushNow(
    ctx: PushContext,
    conversation: Awaited<ReturnType<typeof findConversation>>,
    input: PushInput,
  ): Promise<PushResult> {
    const { tenantId } = ctx;
    const live = await liveSandbox(tenantId, conversation);
    if (live instanceof AppError) throw live;
    const sandbox = live;
    const { environment, repos, dirs } = await reposOf(tenantId, conversation);
    if (!environment || repos.length === 0)
      throw AppError.validation(
        { repo: ["the conversation's environment clones no repository: there is no remote to push to"] },
        'nothing to push to',
      );
    let index = 0;
    if (input.repo !== undefined) {
      index = dirs.indexOf(input.repo);
      if (index < 0)
        throw AppError.validation({
          repo: [`is not one of the environment's repositories: ${dirs.join(', ')}`],
        });
    } else if (dirs.length > 1) {
      throw AppError.validation({
        repo: [`the environment clones ${dirs.length} repositories; name one: ${dirs.join(', ')}`],
      });
    }
    const repo = repos[index] as RepoEntry;
    const dir = dirs[index] as string;
    const remote = safeUrl(repo.url);
    const token = await tokenFor(tenantId, repo, dir, environment, conversation.vault_id);
    const registry = await registryFor(tenantId, conversation.id, token);
    const redact = (text: string) => registry.redact(text).toString('utf8');

    // The branch: asked for, or the one this sandbox pushed last for the repository (an update),
    // or a new default name (a new sandbox is a new clone: its commits are not on the old branch).
    const branch = input.branch ?? (await defaultBranch(tenantId, conversation.id, dir, sandbox.id));
    const problem = branchNameProblem(branch);
    if (problem) throw AppError.validation({ branch: [problem] });
    const pr = input.pull_request === true ? {} : input.pull_request || null;
    if (pr?.base !== undefined) {
      const baseProblem = branchNameProblem(pr.base);
      if (baseProblem) throw AppError.validation({ 'pull_request.base': [baseProblem] });
    }

    const link = linkOf(conversation.id);
    const message = input.message ?? redact(await defaultMessage(tenantId, conversation));
    const user = await db.selectFrom('users').select(['email']).where('id', '=', tenantId).executeTakeFirst();
    const email = user?.email ?? COMMITTER.email;
    const author = { name: email.split('@')[0] || email, email };

    const commit = await commitInSandbox(
      deps.sandbox,
      sandbox.name,
      { dir: `/home/sandbox/${dir}`, branch, message, author, committer: COMMITTER },
      gitEnv,
    ).catch((err: unknown) => sandboxGone(err));
    if (!commit.ok) {
      if ('timedOut' in commit)
        throw new AppError('push_failed', `committing in ${dir} did not finish within 5 minutes`);
      if (commit.exitCode === COMMIT_EXIT.notARepository)
        throw new AppError(
          'push_failed',
          `/home/sandbox/${dir} is not a git repository any more (the agent removed or moved it)`,
        );
      if (commit.exitCode === COMMIT_EXIT.badBranch)
        throw AppError.validation({ branch: ['git refuses it as a branch name'] });
      if (commit.exitCode === COMMIT_EXIT.localBranchExists)
        throw new AppError(
          'branch_exists',
          `the sandbox's repository ${dir} has a branch ${branch} that is not checked out: choose another branch name`,
          { extra: { branch } },
        );
      if (commit.exitCode === COMMIT_EXIT.noCommits)
        throw new AppError(
          'push_failed',
          `${dir} has no commit and nothing to commit: there is nothing to push`,
        );
      throw new AppError(
        'push_failed',
        `committing the agent's work in ${dir} failed (exit ${commit.exitCode}): ${redact(quoteOutput(commit.output))}`,
      );
    }

    const pushed = await pushFromSandbox(
      deps.sandbox,
      sandbox.name,
      { objects: commit.objects, sha: commit.sha, branch, url: repo.url, token },
      gitEnv,
    ).catch((err: unknown) => sandboxGone(err));
    if (!pushed.ok) {
      const said = pushed.output ? `; the remote said:\n${redact(pushed.output)}` : '';
      const extra = { extra: { branch, commit: commit.sha } };
      switch (pushed.kind) {
        case 'exists':
          throw new AppError(
            'branch_exists',
            `the branch ${branch} exists on ${remote} with commits this one does not have: push under another branch name${said}`,
            extra,
          );
        case 'rejected':
          throw new AppError(
            'push_rejected',
            `${remote} refused the push to ${branch} (a protected branch or a server hook): push to a new branch instead and open a pull request${said}`,
            extra,
          );
        case 'auth':
          throw new AppError(
            'push_auth_failed',
            `${remote} refused the environment repository's token: check that it is valid and may write to the repository (contents:write)${said}`,
            extra,
          );
        case 'timeout':
          throw new AppError('push_failed', `pushing to ${remote} did not finish within 5 minutes`, extra);
        default:
          throw new AppError('push_failed', `pushing to ${remote} failed${said}`, extra);
      }
    }

    await db
      .insertInto('conversation_pushes')
      .values({
        id: uuidv7(),
        conversation_id: conversation.id,
        tenant_id: tenantId,
        sandbox_id: sandbox.id,
        repo_dir: dir,
        branch,
        commit_sha: commit.sha,
        committed: commit.committed,
      })
      .execute();
    await deps.audit.record({
      type: 'conversation.pushed',
      tenantId,
      actor: ctx.actor,
      ip: ctx.ip,
      metadata: {
        conversation_id: conversation.id,
        repo: dir,
        remote,
        branch,
        commit: commit.sha,
        committed: commit.committed,
      },
    });
    const view: PushView = { repo: dir, branch, commit: commit.sha, committed: commit.committed, remote };
    if (!pr) return { push: view, pull_request: null };

    const target = remoteTarget(repo.url, deps.gitHosts);
    const prompts = await db
      .selectFrom('turns')
      .select(['prompt'])
      .where('tenant_id', '=', tenantId)
      .where('conversation_id', '=', conversation.id)
      .orderBy('seq', 'asc')
      .limit(20)
      .execute();
    const title = pr.title ?? redact(conversation.title || commitSubject(prompts[0]?.prompt ?? ''));
    const body =
      pr.body ??
      redact(
        [
          `Opened by [Paddock](${link}) from the conversation [${conversation.title}](${link}).`,
          '',
          '**Prompts**',
          '',
          ...prompts.map((p, i) => `${i + 1}. ${commitSubject(p.prompt)}`),
        ].join('\n'),
      );
    let opened: OpenedPullRequest;
    try {
      opened = await openPullRequest(target, token, { title, body, branch, base: pr.base });
    } catch (err) {
      if (!(err instanceof PullRequestError)) throw err;
      const kind = target.provider === 'github' ? 'pull request' : 'merge request';
      throw new AppError(
        err.kind === 'unreachable' ? 'pull_request_failed' : 'pull_request_refused',
        `the branch ${branch} is pushed, but the ${kind} was not opened: ${redact(err.message)}`,
        { extra: { push: view } },
      );
    }
    const stored = await db
      .insertInto('conversation_pull_requests')
      .values({
        conversation_id: conversation.id,
        tenant_id: tenantId,
        repo_dir: dir,
        branch,
        provider: opened.provider,
        number: opened.number,
        url: opened.url,
      })
      .onConflict((oc) =>
        oc
          .columns(['conversation_id', 'repo_dir', 'branch'])
          .doUpdateSet({ provider: opened.provider, number: opened.number, url: opened.url }),
      )
      .returning(['created_at'])
      .executeTakeFirstOrThrow();
    await deps.audit.record({
      type: 'conversation.pull_request.opened',
      tenantId,
      actor: ctx.actor,
      ip: ctx.ip,
      metadata: {
        conversation_id: conversation.id,
        repo: dir,
        branch,
        provider: opened.provider,
        number: opened.number,
        url: opened.url,
        created: opened.created,
      },
    });
    return {
      push: view,
      pull_request: {
        repo: dir,
        branch,
        provider: opened.provider,
        number: opened.number,
        url: opened.url,
        created_at: stored.created_at.toISOString(),
        created: opened.created,
        base: opened.base,
      },
    };
  }
}

/** The backend lost the sandbox under the request (reclaimed meanwhile): a 409, not a 500. */
function sandboxGone(err: unknown): never {
  const status = (err as { status?: unknown } | null)?.status;
  if (status === 404)
    throw new AppError('sandbox_not_running', `the conversation's sandbox is not running: ${WAKE_HINT}`);
  throw new AppError('service_unavailable', 'the sandbox backend did not answer; retry shortly', {
    cause: err,
  });
}

/** The URL for a message: origin and path only. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return 'the repository';
  }
}
