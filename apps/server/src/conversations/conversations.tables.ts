import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

export type ConversationStatus = 'pending' | 'running' | 'idle' | 'failed' | 'terminated';
export type ConversationSource = 'api' | 'ui' | 'cli' | 'sandbox';
export type SandboxStatus = 'pending' | 'starting' | 'ready' | 'terminated' | 'failed';
export type TurnStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'interrupted';
/** `events`: the common turn events of a turn (TurnEvent JSON in `data`, migration 0021). */
export type LogStream = 'stdout' | 'stderr' | 'stage' | 'events';
export type StageState = 'started' | 'done' | 'failed' | 'interrupted';
/** Stage names of the spec (Conversation log stream). */
export type StageName =
  | 'provision'
  | 'checkpoint_restore'
  | 'packages'
  | 'network'
  | 'clone'
  | 'setup'
  /** The agent's CLI answers `--version` in the sandbox (runtime-probe.ts). */
  | 'runtime'
  | 'turn'
  | 'reattach'
  | 'sandbox'
  | 'terminate'
  /** The log itself: `failed` once when the output budget is reached (log-writer.ts). */
  | 'log';

export const LIVE_SANDBOX_STATUSES: readonly SandboxStatus[] = ['pending', 'starting', 'ready'];

export interface TurnUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_tokens?: number;
  cost_usd?: number;
}

export interface ConversationsTable {
  id: string;
  tenant_id: string;
  agent_id: string | null;
  vault_id: string | null;
  status: ConversationStatus;
  source: ConversationSource;
  parent_conversation_id: string | null;
  title: string;
  failure_reason: string | null;
  unread: ColumnType<boolean, boolean | undefined, boolean>;
  runtime_session_id: string | null;
  /** The runtime's on-disk session state, sealed with the tenant key (secrets/envelope.ts). */
  session_state: Buffer | null;
  session_state_at: NullableTimestamp;
  log_bytes: ColumnType<string, string | number | undefined, string | number>;
  log_truncated: ColumnType<boolean, boolean | undefined, boolean>;
  /** Bytes of the prompts and images its turns store (the input bound, conversations.service.ts). */
  input_bytes: ColumnType<string, string | number | undefined, string | number>;
  owner_epoch: ColumnType<string, string | number | undefined, string | number>;
  owner_node: string | null;
  last_activity_at: Timestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SandboxesTable {
  id: string;
  tenant_id: string;
  conversation_id: string;
  name: string;
  status: SandboxStatus;
  reason: string | null;
  checkpoint_id: string | null;
  created_at: Timestamp;
  ready_at: NullableTimestamp;
  ended_at: NullableTimestamp;
  updated_at: Timestamp;
}

/** A backend destroy still owed (destroy-queue.ts). */
export interface SandboxDestroysTable {
  name: string;
  tenant_id: string;
  attempts: Generated<number>;
  last_error: string | null;
  next_at: Generated<Date>;
  created_at: Generated<Date>;
}

/** Backend sandboxes no row knows, as the sandbox reaper's last full listing found them (reported, never destroyed). */
export interface UntrackedSandboxesTable {
  name: string;
  first_seen_at: ColumnType<Date, Date, never>;
  last_seen_at: ColumnType<Date, Date, Date>;
}

export interface TurnsTable {
  id: string;
  tenant_id: string;
  conversation_id: string;
  seq: number;
  prompt: string;
  status: TurnStatus;
  sandbox_id: string | null;
  exec_session_id: string | null;
  runtime_session_id: string | null;
  exit_code: number | null;
  error: string | null;
  usage: Json<TurnUsage | null> | null;
  stdout_raw_bytes: ColumnType<string, string | number | undefined, string | number>;
  stderr_raw_bytes: ColumnType<string, string | number | undefined, string | number>;
  created_at: Timestamp;
  started_at: NullableTimestamp;
  ended_at: NullableTimestamp;
}

export interface TurnImagesTable {
  id: string;
  tenant_id: string;
  turn_id: string;
  media_type: string;
  data: Buffer;
  created_at: Timestamp;
}

export interface LogEventsTable {
  /** bigint: returned by pg as a string. */
  id: Generated<string>;
  tenant_id: string;
  conversation_id: string;
  turn_id: string | null;
  stream: LogStream;
  data: Buffer | null;
  stage: StageName | null;
  state: StageState | null;
  duration_ms: number | null;
  message: string | null;
  created_at: Timestamp;
}

/** One server process's owner lease (migration 0031; engine/owner.ts invariant 7). */
export interface OwnerNodesTable {
  node: string;
  backend_pid: number;
  backend_start: Date;
  lease_until: Date;
  renewed_at: Generated<Date>;
}

export interface ConversationsTables {
  conversations: ConversationsTable;
  owner_nodes: OwnerNodesTable;
  sandboxes: SandboxesTable;
  sandbox_destroys: SandboxDestroysTable;
  untracked_sandboxes: UntrackedSandboxesTable;
  turns: TurnsTable;
  turn_images: TurnImagesTable;
  log_events: LogEventsTable;
}
