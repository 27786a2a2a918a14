// The tables of Changes (migration 0032) and the shape of one changed file.
import type { ColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

export type ChangeStatus = 'added' | 'modified' | 'deleted' | 'renamed' | 'type_changed';

/** One changed file of a repository. */
export interface ChangedFile {
  path: string;
  /** The path before a rename; null otherwise. */
  old_path: string | null;
  status: ChangeStatus;
  additions: number;
  deletions: number;
  binary: boolean;
  /** True when the change is in commits only (nothing of it left uncommitted in the working tree). */
  committed: boolean;
  /** The unified diff (redacted), when asked for and inlined; null when omitted (see patch_omitted). */
  patch?: string | null;
  /** Why the patch is not inlined: a binary file, or larger than the bound. */
  patch_omitted?: 'binary' | 'too_large' | null;
}

/** One repository's changes. */
export interface RepositoryChanges {
  /** Relative to /home/sandbox. */
  dir: string;
  origin: 'cloned' | 'created';
  /** The clone's URL without credentials (cloned repositories). */
  url: string | null;
  /** The commit (or, for a repository without commits, the empty tree) compared with. */
  base: string;
  head: string | null;
  files: ChangedFile[];
  additions: number;
  deletions: number;
  /** Files beyond the listing bound, not listed. */
  truncated_files: number;
  /** The directory is gone or is no longer a git repository (its files are not listed). */
  missing: boolean;
}

export interface ConversationRepositoriesTable {
  tenant_id: string;
  conversation_id: string;
  dir: string;
  url: string;
  base_commit: string;
  created_at: Timestamp;
}

export type TurnChangesStatus = 'recording' | 'recorded' | 'failed';

export interface TurnChangesTable {
  turn_id: string;
  tenant_id: string;
  conversation_id: string;
  status: TurnChangesStatus;
  /** dir → tree at the turn's start. */
  start_trees: Json<Record<string, string>>;
  repositories: Json<RepositoryChanges[] | null> | null;
  error: string | null;
  created_at: Timestamp;
  recorded_at: NullableTimestamp;
}

export interface ChangesTables {
  conversation_repositories: ConversationRepositoriesTable;
  turn_changes: TurnChangesTable;
}
