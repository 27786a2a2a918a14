// The tables of the push (migration 0034): the branches a conversation pushed and the pull or
// merge requests opened for them.
import type { ColumnType } from 'kysely';

type CreatedAt = ColumnType<Date, Date | string | undefined, never>;

export interface ConversationPushesTable {
  id: string;
  conversation_id: string;
  tenant_id: string;
  /** The sandbox the push came from: a new sandbox (a re-clone) gets a new default branch. */
  sandbox_id: string;
  /** The repository's directory under /home/sandbox. */
  repo_dir: string;
  branch: string;
  commit_sha: string;
  /** Whether the push committed uncommitted work first. */
  committed: boolean;
  created_at: CreatedAt;
}

export interface ConversationPullRequestsTable {
  conversation_id: string;
  tenant_id: string;
  repo_dir: string;
  branch: string;
  provider: 'github' | 'gitlab';
  number: number;
  url: string;
  created_at: CreatedAt;
}

export interface PushTables {
  conversation_pushes: ConversationPushesTable;
  conversation_pull_requests: ConversationPullRequestsTable;
}
