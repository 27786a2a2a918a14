// What one turn changed, recorded by the conversation's owner around the turn (the conversation
// server calls start() before the turn's process starts and finish() after its end is stored),
// and the bases of the cloned repositories, recorded by the provisioner after the clone stage.
//
// Invariants (test/work.changes.test.ts):
// - start() stores in the turn's `turn_changes` row, before the turn runs, the trees the turn
//   starts from: known without an exec when this process provisioned the sandbox (the clones'
//   commits) or recorded its previous turn (that turn's end trees), else a snapshot of every
//   repository's working tree (changes-script.ts `snap`: a tree written from a temporary index,
//   the user's repository untouched). So a turn's start waits for no exec in the common case
//   (the conversations benchmark's follow-up). What changes between two turns (a terminal)
//   counts toward the next one; finish() snapshots again and stores the diff between
//   the two, with stats and bounded patches redacted by the owner's registry. The row is the
//   record: it survives a reclaim of the sandbox, and an owner that took the turn over after a
//   crash finishes the record its predecessor started.
// - A failure to record never fails the turn: the caller logs a warning; finish() marks the row
//   `failed` with a safe reason.
// - A base is written once per (conversation, dir) (ON CONFLICT DO NOTHING): a re-provisioned
//   conversation keeps its original base. URLs are stored without credentials.
import type { SandboxClient } from '@paddock/sandbox-client';
import type { Db } from '../../db/database.ts';
import type { SecretRegistry } from '../log/redactor.ts';
import { clonedBases, repositoryView, runChangesScript } from './changes.ts';
import { MAX_TURN_PATCH_BYTES } from './changes-script.ts';

export interface TurnChangesRecorder {
  start(input: TurnRef): Promise<void>;
  finish(input: TurnRef & { registry: Pick<SecretRegistry, 'redact'> }): Promise<void>;
}

export interface TurnRef {
  tenantId: string;
  conversationId: string;
  turnId: string;
  sandboxName: string;
}

/**
 * Where the next turn of a sandbox starts from, known without asking the sandbox: the clones'
 * commits after provisioning (recordCloneBases), then each turn's end trees (finish). A turn
 * whose sandbox this process did not provision nor record (taken over from another owner) is
 * snapshot before it starts instead. Bounded: the oldest sandboxes are forgotten first.
 */
const startPoints = new Map<string, Record<string, string>>();
const START_POINTS_MAX = 10_000;
function remember(sandboxName: string, trees: Record<string, string>): void {
  startPoints.delete(sandboxName);
  startPoints.set(sandboxName, trees);
  if (startPoints.size > START_POINTS_MAX) {
    const oldest = startPoints.keys().next().value;
    if (oldest !== undefined) startPoints.delete(oldest);
  }
}

export function createTurnChangesRecorder(deps: { db: Db; sandbox: SandboxClient }): TurnChangesRecorder {
  const { db, sandbox } = deps;
  const bases = async (ref: TurnRef) =>
    (await clonedBases(db, ref.tenantId, ref.conversationId)).map((b) => ({
      dir: b.dir,
      base: b.base_commit,
    }));
  return {
    async start(ref) {
      let trees = startPoints.get(ref.sandboxName);
      if (!trees) {
        const { repositories } = await runChangesScript(sandbox, ref.sandboxName, await bases(ref), {
          mode: 'snap',
        });
        trees = {};
        for (const repo of repositories) if (repo.present) trees[repo.dir] = repo.tree;
      }
      await db
        .insertInto('turn_changes')
        .values({
          turn_id: ref.turnId,
          tenant_id: ref.tenantId,
          conversation_id: ref.conversationId,
          status: 'recording',
          start_trees: JSON.stringify(trees),
        })
        .onConflict((oc) => oc.column('turn_id').doNothing())
        .execute();
    },

    async finish(ref) {
      const row = await db
        .selectFrom('turn_changes')
        .select(['start_trees', 'status'])
        .where('tenant_id', '=', ref.tenantId)
        .where('turn_id', '=', ref.turnId)
        .executeTakeFirst();
      if (row?.status !== 'recording') {
        startPoints.delete(ref.sandboxName); // not known: the next turn is snapshot first
        return;
      }
      try {
        const rows = await clonedBases(db, ref.tenantId, ref.conversationId);
        const cloned = rows.map((b) => ({ dir: b.dir, base: b.base_commit }));
        const urls = new Map(rows.map((b) => [b.dir, b.url]));
        const { repositories } = await runChangesScript(sandbox, ref.sandboxName, cloned, {
          mode: 'turn',
          starts: row.start_trees,
        });
        const ends: Record<string, string> = {};
        for (const repo of repositories) if (repo.present) ends[repo.dir] = repo.tree;
        remember(ref.sandboxName, ends);
        const redact = (text: string) => ref.registry.redact(text).toString('utf8');
        const budget = { left: MAX_TURN_PATCH_BYTES };
        const views = repositories
          .map((repo) =>
            repositoryView(repo, urls.get(repo.dir) ?? null, redact, { patches: true, patchBudget: budget }),
          )
          // A repository this turn did not touch is not part of its record.
          .filter((view) => view.files.length > 0 || view.truncated_files > 0);
        await db
          .updateTable('turn_changes')
          .set({ status: 'recorded', repositories: JSON.stringify(views), recorded_at: new Date() })
          .where('tenant_id', '=', ref.tenantId)
          .where('turn_id', '=', ref.turnId)
          .execute();
      } catch (err) {
        await db
          .updateTable('turn_changes')
          .set({
            status: 'failed',
            error: 'the changes could not be computed in the sandbox',
            recorded_at: new Date(),
          })
          .where('tenant_id', '=', ref.tenantId)
          .where('turn_id', '=', ref.turnId)
          .execute()
          .catch(() => {});
        throw err;
      }
    },
  };
}

/** `git rev-parse HEAD` of each cloned directory, in one exec. */
const BASES_SCRIPT =
  'for d in "$@"; do printf "%s\\0" "$(git -C "/home/sandbox/$d" rev-parse -q --verify "HEAD^{commit}" 2>/dev/null)"; done';

/**
 * After the clone stage (or a warm restore of a checkpoint that holds the clones): the base of
 * every cloned repository, written once per (conversation, dir).
 */
export async function recordCloneBases(
  deps: { db: Db; sandbox: SandboxClient },
  input: {
    tenantId: string;
    conversationId: string;
    sandboxName: string;
    repos: { dir: string; url: string }[];
  },
): Promise<void> {
  if (input.repos.length === 0) {
    // A fresh sandbox without clones: its first turn starts from nothing (created repositories
    // are compared with the empty tree).
    remember(input.sandboxName, {});
    return;
  }
  startPoints.delete(input.sandboxName);
  const result = await deps.sandbox.exec(input.sandboxName, {
    cmd: ['sh', '-c', BASES_SCRIPT, 'paddock-bases', ...input.repos.map((r) => r.dir)],
    timeoutMs: 30_000,
    retry: true,
  });
  const commits = result.stdout.toString('utf8').split('\0');
  const firstTurnFrom: Record<string, string> = {};
  input.repos.forEach((repo, n) => {
    const commit = commits[n] ?? '';
    if (/^[0-9a-f]{40,64}$/.test(commit)) firstTurnFrom[repo.dir] = commit;
  });
  // This sandbox's first turn starts from its clones as they are now (a commit is a tree-ish).
  remember(input.sandboxName, firstTurnFrom);
  const rows = input.repos
    .map((repo, n) => ({ repo, commit: commits[n] ?? '' }))
    .filter(({ commit }) => /^[0-9a-f]{40,64}$/.test(commit))
    .map(({ repo, commit }) => ({
      tenant_id: input.tenantId,
      conversation_id: input.conversationId,
      dir: repo.dir,
      url: withoutCredentials(repo.url),
      base_commit: commit,
    }));
  if (rows.length === 0) return;
  await deps.db
    .insertInto('conversation_repositories')
    .values(rows)
    .onConflict((oc) => oc.columns(['conversation_id', 'dir']).doNothing())
    .execute();
}

/** Origin and path only: never a user, password or query. */
function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '';
  }
}
