import { type Kysely, sql } from 'kysely';

// Issue 41, deliverable 4 (conversations/work/push.service.ts): what a conversation pushed out of
// its sandbox. `conversation_pushes`: one row per branch push (the repository's directory, the
// branch, the commit), which also numbers the default branch names (paddock/<id>-<n>) so that a
// re-provisioned sandbox does not reuse one. `conversation_pull_requests`: the pull (or merge)
// request opened for a pushed branch, shown on GET /api/conversations/:id; one per
// (conversation, repository, branch). Both go with their conversation and tenant.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE conversation_pushes (
      id uuid PRIMARY KEY,
      conversation_id uuid NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      sandbox_id uuid NOT NULL,
      repo_dir text NOT NULL,
      branch text NOT NULL,
      commit_sha text NOT NULL,
      committed boolean NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX conversation_pushes_conversation_idx ON conversation_pushes (conversation_id, created_at)`.execute(
    db,
  );
  await sql`
    CREATE TABLE conversation_pull_requests (
      conversation_id uuid NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      tenant_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      repo_dir text NOT NULL,
      branch text NOT NULL,
      provider text NOT NULL CHECK (provider IN ('github', 'gitlab')),
      number integer NOT NULL,
      url text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (conversation_id, repo_dir, branch)
    )`.execute(db);
}
