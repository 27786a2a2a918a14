// Changes (issue 41, deliverable 1): what the agent changed in the sandbox's repositories, against
// their base, computed inside the live sandbox with one exec of changes-script.ts; and what each
// turn changed, recorded after the turn (changes-turns.ts) so that it outlives the sandbox.
//
// Invariants (test/work.changes.test.ts):
// - Tenant-scoped: a conversation of another tenant answers 404 exactly like a missing one. The
//   routes are the owner's only (a sandbox key is refused by requireAuth: the routes do not opt in
//   to conversation scope).
// - Any replica answers: the conversation's live sandbox row (status `ready`) names the sandbox,
//   which is called directly. None: 409 `sandbox_not_running`, saying how to wake it.
// - Every path and patch passes a redactor holding the conversation's secret values: its lineage's
//   environment and vault secrets, the account's inference keys, and the sandbox key read from the
//   sandbox's env file — what the owner's redactor holds (env-file.ts).
// - Bounded: a file's patch is inlined up to MAX_FILE_PATCH_BYTES, binary files never; a
//   repository lists at most MAX_FILES_PER_REPOSITORY files; one turn's record holds at most
//   MAX_TURN_PATCH_BYTES of patches.
import type { SandboxClient } from '@paddock/sandbox-client';
import type { Db } from '../../db/database.ts';
import { AppError } from '../../http/errors.ts';
import type { InferenceCredentialsService } from '../../inference-credentials/inference-credentials.service.ts';
import { isUuid } from '../../resources/fields.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import { createSecretRegistry, type SecretRegistry } from '../log/redactor.ts';
import { lineageSecretValues } from '../provisioning/lineage-secrets.ts';
import type { ChangedFile, RepositoryChanges, TurnChangesStatus } from './changes.tables.ts';
import {
  type ClonedBase,
  MAX_FILE_PATCH_BYTES,
  MAX_FILES_PER_REPOSITORY,
  MAX_TURN_PATCH_BYTES,
  parseScriptOutput,
  type ScriptMode,
  type ScriptRepository,
  scriptArgv,
} from './changes-script.ts';

/** One exec of the script may take this long (a large untracked tree to hash). */
export const CHANGES_TIMEOUT_MS = 60_000;
/** The script's stdout is kept up to this size (the listing of many files). */
const MAX_SCRIPT_OUTPUT_BYTES = 32 * 1024 * 1024;

export interface ChangesDeps {
  db: Db;
  sandbox: SandboxClient;
  secrets: Pick<SecretsService, 'decryptOwner'>;
  inferenceCredentials: Pick<InferenceCredentialsService, 'forSandbox'>;
}

export interface TurnChangesView {
  turn_id: string;
  seq: number;
  /** `not_recorded`: the turn has not run, or ran before changes were recorded. */
  status: TurnChangesStatus | 'not_recorded';
  error: string | null;
  recorded_at: string | null;
  repositories: RepositoryChanges[];
}

export const SANDBOX_NOT_RUNNING_MESSAGE =
  "the conversation's sandbox is not running (never provisioned, reclaimed after being idle, or terminated): send a prompt to wake it (POST /api/conversations/:id/prompts, `paddock run`, or the console's prompt box)";

/** The cloned repositories' bases of a conversation, as recorded after its clone stage. */
export async function clonedBases(db: Db, tenantId: string, conversationId: string) {
  return await db
    .selectFrom('conversation_repositories')
    .select(['dir', 'url', 'base_commit'])
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .orderBy('dir')
    .execute();
}

/** The script ran and failed (its stderr is not kept: it may hold what the sandbox holds). */
export class ChangesScriptError extends Error {
  readonly exitCode: number;
  constructor(exitCode: number) {
    super(`the changes script exited ${exitCode}`);
    this.name = 'ChangesScriptError';
    this.exitCode = exitCode;
  }
}

/** Runs the script once in `sandboxName`; throws when it could not run. */
export async function runChangesScript(
  sandbox: SandboxClient,
  sandboxName: string,
  cloned: ClonedBase[],
  mode: ScriptMode,
  signal?: AbortSignal,
): Promise<ReturnType<typeof parseScriptOutput>> {
  const result = await sandbox.exec(sandboxName, {
    cmd: scriptArgv(cloned, mode),
    timeoutMs: CHANGES_TIMEOUT_MS,
    maxOutputBytes: MAX_SCRIPT_OUTPUT_BYTES,
    ...(signal ? { signal } : {}),
  });
  if (result.exitCode !== 0) throw new ChangesScriptError(result.exitCode);
  const limit =
    mode.mode === 'file' ? MAX_FILE_PATCH_BYTES + 1 : mode.mode === 'turn' ? MAX_TURN_PATCH_BYTES + 1 : 0;
  return parseScriptOutput(result.stdout, limit);
}

/**
 * The view of one repository: paths redacted, at most MAX_FILES_PER_REPOSITORY files, patches
 * (when the script printed them) inlined per file within the bounds.
 */
export function repositoryView(
  repo: ScriptRepository,
  url: string | null,
  redact: (text: string) => string,
  options: { patches: boolean; patchBudget?: { left: number } },
): RepositoryChanges {
  const files: ChangedFile[] = [];
  let additions = 0;
  let deletions = 0;
  repo.files.forEach((file, n) => {
    additions += file.additions;
    deletions += file.deletions;
    if (files.length >= MAX_FILES_PER_REPOSITORY) return;
    const view: ChangedFile = {
      ...file,
      path: redact(file.path),
      old_path: file.old_path === null ? null : redact(file.old_path),
    };
    if (options.patches) {
      const patch = repo.patches?.[n];
      const cut = repo.patchTruncated && n >= (repo.patches?.length ?? 0) - 1;
      if (file.binary) {
        view.patch = null;
        view.patch_omitted = 'binary';
      } else if (patch === undefined || cut || patch.length > MAX_FILE_PATCH_BYTES) {
        view.patch = null;
        view.patch_omitted = 'too_large';
      } else if (options.patchBudget && patch.length > options.patchBudget.left) {
        view.patch = null;
        view.patch_omitted = 'too_large';
      } else {
        if (options.patchBudget) options.patchBudget.left -= patch.length;
        view.patch = redact(patch.toString('utf8'));
        view.patch_omitted = null;
      }
    }
    files.push(view);
  });
  return {
    dir: redact(repo.dir),
    origin: repo.origin,
    url,
    base: repo.base,
    head: repo.head,
    files,
    additions,
    deletions,
    truncated_files: Math.max(0, repo.files.length - MAX_FILES_PER_REPOSITORY),
    missing: !repo.present,
  };
}

export function createChangesService(deps: ChangesDeps) {
  const { db, sandbox } = deps;

  /** The conversation (tenant-scoped: 404 otherwise). */
  async function conversation(tenantId: string, conversationId: string) {
    if (!isUuid(conversationId)) throw new AppError('not_found', 'conversation not found');
    const row = await db
      .selectFrom('conversations')
      .select(['id'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', conversationId)
      .executeTakeFirst();
    if (!row) throw new AppError('not_found', 'conversation not found');
    return row;
  }

  /** The live sandbox's name; 409 sandbox_not_running without one. */
  async function liveSandbox(tenantId: string, conversationId: string): Promise<string> {
    const row = await db
      .selectFrom('sandboxes')
      .select(['name'])
      .where('tenant_id', '=', tenantId)
      .where('conversation_id', '=', conversationId)
      .where('status', '=', 'ready')
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
    if (!row) throw new AppError('sandbox_not_running', SANDBOX_NOT_RUNNING_MESSAGE);
    return row.name;
  }

  /** A registry with what the conversation's owner registers (env-file.ts), for this request. */
  async function registryFor(tenantId: string, conversationId: string): Promise<SecretRegistry> {
    const registry = createSecretRegistry();
    const [lineage, credentials] = await Promise.all([
      lineageSecretValues({ db, secrets: deps.secrets }, tenantId, conversationId, { self: true }),
      deps.inferenceCredentials.forSandbox(tenantId),
    ]);
    registry.registerAll([...lineage, ...credentials.map((c) => c.apiKey)]);
    return registry;
  }

  async function compute(tenantId: string, conversationId: string, mode: ScriptMode, patches: boolean) {
    await conversation(tenantId, conversationId);
    const [name, bases, registry] = await Promise.all([
      liveSandbox(tenantId, conversationId),
      clonedBases(db, tenantId, conversationId),
      registryFor(tenantId, conversationId),
    ]);
    let output: Awaited<ReturnType<typeof runChangesScript>>;
    try {
      output = await runChangesScript(
        sandbox,
        name,
        bases.map((b) => ({ dir: b.dir, base: b.base_commit })),
        mode,
      );
    } catch (err) {
      // The sandbox went away between the row's read and the exec (a reclaim): the same 409.
      if ((await sandbox.get(name).catch(() => undefined)) === null)
        throw new AppError('sandbox_not_running', SANDBOX_NOT_RUNNING_MESSAGE);
      // Never the script's own words (its stderr may hold anything the sandbox holds).
      throw new AppError(
        'changes_unavailable',
        `the changes could not be computed in the sandbox${err instanceof ChangesScriptError ? ` (exit ${err.exitCode})` : ''}: is /home/sandbox/.paddock writable and git installed?`,
        { cause: err },
      );
    }
    if (output.sandboxKey) registry.register(output.sandboxKey);
    const redact = (text: string) => registry.redact(text).toString('utf8');
    const urls = new Map(bases.map((b) => [b.dir, b.url]));
    return output.repositories.map((repo) =>
      repositoryView(repo, urls.get(repo.dir) ?? null, redact, { patches }),
    );
  }

  return {
    /** GET /api/conversations/:id/changes */
    async current(tenantId: string, conversationId: string, repo?: string): Promise<RepositoryChanges[]> {
      const all = await compute(tenantId, conversationId, { mode: 'list' }, false);
      return repo === undefined ? all : all.filter((r) => r.dir === repo);
    },

    /** GET /api/conversations/:id/changes?repo=&file= : one file with its patch. */
    async file(
      tenantId: string,
      conversationId: string,
      repo: string,
      path: string,
    ): Promise<{ repository: RepositoryChanges; file: ChangedFile }> {
      // One exec in the common case: the file alone. An `added` or `deleted` file may be a side
      // of a rename, which only the whole listing knows: then the listing (a rename's old path
      // alone is not listed: 404), and the file again with both paths, so that its patch shows
      // the rename.
      const only = async (oldPath: string | null) => {
        const [repository] = await compute(
          tenantId,
          conversationId,
          { mode: 'file', dir: repo, path, oldPath },
          true,
        );
        return { repository, file: repository?.files.find((f) => f.path === path) };
      };
      let found = await only(null);
      if (!found.repository) throw new AppError('not_found', `no repository ${repo} in the sandbox`);
      if (!found.file || found.file.status === 'added' || found.file.status === 'deleted') {
        const listed = await compute(tenantId, conversationId, { mode: 'list' }, false);
        const entry = listed.find((r) => r.dir === repo)?.files.find((f) => f.path === path);
        if (!entry) throw new AppError('not_found', `${path} has no changes in ${repo}`);
        if (entry.old_path !== null) found = await only(entry.old_path);
      }
      const { repository, file } = found;
      if (!repository || !file) throw new AppError('not_found', `${path} has no changes in ${repo}`);
      return { repository: { ...repository, files: [file] }, file };
    },

    /** GET /api/conversations/:id/turns/:turn_id/changes */
    async turn(tenantId: string, conversationId: string, turnId: string): Promise<TurnChangesView> {
      await conversation(tenantId, conversationId);
      if (!isUuid(turnId)) throw new AppError('not_found', 'turn not found');
      const turn = await db
        .selectFrom('turns')
        .leftJoin('turn_changes', 'turn_changes.turn_id', 'turns.id')
        .select([
          'turns.id',
          'turns.seq',
          'turn_changes.status',
          'turn_changes.error',
          'turn_changes.recorded_at',
          'turn_changes.repositories',
        ])
        .where('turns.tenant_id', '=', tenantId)
        .where('turns.conversation_id', '=', conversationId)
        .where('turns.id', '=', turnId)
        .executeTakeFirst();
      if (!turn) throw new AppError('not_found', 'turn not found');
      return {
        turn_id: turn.id,
        seq: turn.seq,
        status: turn.status ?? 'not_recorded',
        error: turn.error ?? null,
        recorded_at: turn.recorded_at ? turn.recorded_at.toISOString() : null,
        repositories: turn.repositories ?? [],
      };
    },

    /** The turn id of seq `seq` (the CLI's --turn N), 404 when there is none. */
    async turnBySeq(tenantId: string, conversationId: string, seq: number): Promise<string> {
      const row = await db
        .selectFrom('turns')
        .select('id')
        .where('tenant_id', '=', tenantId)
        .where('conversation_id', '=', conversationId)
        .where('seq', '=', seq)
        .executeTakeFirst();
      if (!row) throw new AppError('not_found', `turn ${seq} not found`);
      return row.id;
    },
  };
}

export type ChangesService = ReturnType<typeof createChangesService>;
