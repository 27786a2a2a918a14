// The seams between the engine's rooms. Each room lives in its own folder and keeps the
// invariants written at the top of its files; these types are the only thing the rooms share.
//
//   routes ─▶ conversations.service (gates, commands) ─▶ engine (one conversation server per
//   owned conversation: provisioner → turns → lifecycle clock) ─▶ log writer ─▶ log_events rows
//                                                                              └▶ feed ─▶ SSE/events readers
//
// - engine/owner.ts              exactly one owner per live conversation (advisory lock + lease epoch)
// - provisioning/provisioner.ts  the provision stages, every backend call through packages/sandbox-client
// - turns/runtimes/*.ts          one adapter per runtime: the headless command of a turn
// - log/log-writer.ts            the single writer: redact → budget → fenced batch INSERT → notify
// - log/feed.ts                  wake-ups for readers in every process (in-process fan-out + LISTEN/NOTIFY)
// - engine/lifecycle.ts          the minute clock: idle timeout, max lifetime, provision deadline
// - turns/reattach.ts            re-joining a still-running turn without losing or duplicating a byte
//
// The rooms are folders (README.md says which may import which); this file names, as types
// only, the types its seams carry from the files that own them.
import type { McpServer, Runtime, Skill } from '../agents/agents.tables.ts';
import type { StageName, StageState, TurnUsage } from './conversations.tables.ts';
import type { LogEventRow } from './log/log-events.repo.ts';
import type { SecretRegistry } from './log/redactor.ts';
import type { CallbackKey } from './provisioning/callback-key.ts';

/** Thrown by any owner write once another process has taken the conversation over. */
export class StaleOwnerError extends Error {
  constructor(conversationId: string) {
    super(`conversation ${conversationId} is owned by another process now`);
    this.name = 'StaleOwnerError';
  }
}

/** Who writes: the conversation and the lease epoch its owner took. */
export interface OwnerLease {
  tenantId: string;
  conversationId: string;
  /** The epoch this owner took (conversations.owner_epoch); every write checks it. */
  epoch: string;
}

export interface StageEvent {
  stage: StageName;
  state: StageState;
  /** Set on done/failed/interrupted: time since the matching `started`. */
  durationMs?: number;
  /** A short human sentence (why a stage failed, what a stage did). Redacted before it is stored. */
  message?: string;
  turnId?: string;
}

/**
 * The single log writer of one conversation (log-writer.ts). Every byte of sandbox output and
 * every stage event of the conversation passes through it, and nothing else appends to
 * log_events. Output is accepted synchronously (no await in the exec data path) and persisted
 * in batches; stage events are persisted in order after all output written before them.
 */
export interface LogWriter {
  /** Output of a turn (turnId set: its raw byte counters advance with each persisted batch) or of a provisioning command. */
  output(stream: 'stdout' | 'stderr', chunk: Buffer, turnId?: string): void;
  /**
   * A common turn event of a turn (turn.ts hands every event of adapter.parseLine): redacted
   * string by string before it is serialised, stored as an `events` row after the output handed
   * in before it (bytes a redactor still holds back excepted), counted against the output budget.
   * Synchronous like output().
   */
  event(turnId: string, event: TurnEvent): void;
  /** Persists all output written so far, then the stage row. Resolves once both are committed. */
  stage(event: StageEvent): Promise<void>;
  /** Ends the redactors' hold-back and persists everything buffered (end of a turn or a command). */
  flush(): Promise<void>;
  /** Flushes, then stops its timer. Further writes throw. */
  close(): Promise<void>;
  /** Resolves on the first failure to persist (StaleOwnerError when fenced off); the owner then stops. */
  readonly failed: Promise<Error>;
}

export interface LogWriterFactory {
  create(input: { lease: OwnerLease; registry: SecretRegistry }): LogWriter;
}

/** A wake-up for readers: rows up to `lastId` exist, or the conversation's owner/status changed. */
export type FeedSignal =
  | { type: 'events'; lastId: string; committed?: CommittedRows }
  | { type: 'status'; status: string }
  | { type: 'owner_lost' };

/**
 * In-process only, never on the wire: the rows a log batch just committed, so readers in the
 * writer's own process need not read them back (log-tail.ts). `after` is the id of the row the
 * conversation's log ended with before them: the one this writer committed before, or for its first
 * batch the conversation's last row when the writer started ('0' when it had none; log-writer.ts
 * invariant 7). A reader that holds exactly the rows up to `after` may append these; any other
 * reader reads the database as it would without them.
 */
export interface CommittedRows {
  after: string;
  /** In id order, as stored (output redacted). */
  rows: LogEventRow[];
}

/** Wake-ups across processes (feed.ts). The rows carry the data; signals only say "look". */
export interface Feed {
  publish(conversationId: string, signal: FeedSignal): void;
  subscribe(conversationId: string, listener: (signal: FeedSignal) => void): () => void;
  close(): Promise<void>;
}

/** What a turn needs to know about the agent (a snapshot taken when the turn starts). */
export interface AgentSnapshot {
  id: string;
  name: string;
  runtime: Runtime;
  model: string;
  system: string | null;
  skills: Skill[];
  mcpServers: Record<string, McpServer>;
  environmentId: string | null;
}

/** The gates a turn passes again before it runs and on reattach (api/gates.ts implements them). */
export interface TurnGates {
  /** Gate 1: the caller's agent, as a snapshot for the turn (404 not_found otherwise). */
  agent(tenantId: string, agentId: string): Promise<AgentSnapshot>;
  /** Gates 3 and 5 again, before a turn runs and on reattach (no lock: nothing is inserted). */
  continuation(tenantId: string): Promise<void>;
}

export interface TurnImage {
  mediaType: string;
  data: Buffer;
}

/**
 * The common shape of the four runtimes' JSON dialects (issue 10): what a person wants to see
 * of a turn. Stored with the turn and offered as the `events` stream; the raw bytes still go
 * to stdout/stderr. Usage keys are those of TurnUsage (input_tokens, output_tokens,
 * cache_read_tokens, cost_usd); the usage events of a turn add up to its figures (one per
 * turn, or one per model call for a runtime that reports per step, such as opencode); a
 * runtime that reports cumulative totals is turned into this turn's figures by its adapter.
 */
export type TurnEvent =
  | { kind: 'text'; text: string }
  | { kind: 'tool_call'; id?: string; name: string; input: unknown }
  | { kind: 'tool_result'; id?: string; is_error: boolean; output: string }
  | { kind: 'error'; message: string }
  | { kind: 'usage'; usage: TurnUsage }
  | { kind: 'session'; session_id: string }
  | { kind: 'raw'; line: string };

/** The headless command of one turn, as a runtime adapter builds it (runtimes/*.ts). */
export interface TurnCommand {
  argv: string[];
  /** Added to the sandbox env for this exec only (never secrets the provisioner did not register). */
  env: Record<string, string>;
  cwd: string;
  /** Files to write before the exec (config files, prompt, images), mode 600 unless stated. */
  files: { path: string; content: Buffer | string; mode?: number }[];
}

/** An agent CLI as pinned in apps/sandboxd/runtime-layer.json (runtime-probe.ts pinnedRuntimes()). */
export interface PinnedCli {
  /** npm package */
  package: string;
  version: string;
  /** the command it installs */
  bin: string;
}

export interface RuntimeAdapter {
  runtime: Runtime;
  /**
   * The CLI the `runtime` provisioning stage probes (`<bin> --version`) and, on a backend without the
   * runtime layer, installs (runtime-probe.ts). Absent: no runtime stage (test doubles).
   */
  cli?: PinnedCli;
  /** Where the runtime keeps the on-disk session state that must survive a new sandbox. */
  sessionPaths: string[];
  /** Where inline skills go: `${skillsDir}/<name>/SKILL.md`. */
  skillsDir: string;
  buildTurn(input: {
    agent: AgentSnapshot;
    prompt: string;
    images: TurnImage[];
    /** The runtime session id of the previous turn, to resume. */
    resumeSessionId: string | null;
    mcpServers: Record<string, McpServer>;
    turnId: string;
    /**
     * The sandbox env the turn runs with (secrets included): read it for settings such as a
     * provider's base URL; never copy a value into argv (the process list) or a log line.
     */
    env: Readonly<Record<string, string>>;
  }): TurnCommand;
  /**
   * Reads one line of the runtime's stdout into common turn events (empty when the line says
   * nothing worth an event). A line the adapter does not understand becomes `{kind: 'raw'}`
   * rather than being dropped; a throw is treated as raw too (turn.ts). `memory`: what the
   * adapter kept from the turn's earlier lines (one map per turn, filled again from the first
   * line on reattach, turn.ts invariant 5), e.g. the provider URL its wrapper printed first.
   */
  parseLine(line: string, memory?: Map<string, string>): TurnEvent[];
}

export type RuntimeRegistry = (runtime: Runtime) => RuntimeAdapter;

export interface ProvisionInput {
  lease: OwnerLease;
  sandboxId: string;
  sandboxName: string;
  agent: AgentSnapshot;
  vaultId: string | null;
  adapter: RuntimeAdapter;
  writer: LogWriter;
  registry: SecretRegistry;
  signal: AbortSignal;
}

/** The result of provisioning, held in the owner's memory only. */
export interface Provisioned {
  /** The env every exec of the sandbox gets (secrets included; registered with the redactor). */
  env: Record<string, string>;
  /** The agent's MCP servers with `${VAR}` resolved. */
  mcpServers: Record<string, McpServer>;
  /**
   * The sandbox callback key (in the env as well); revoked when the owner stops. An env refreshed
   * for changed credentials keeps it.
   */
  callback: CallbackKey;
  path: 'warm' | 'cold';
}

/** A provisioning step failed: the sandbox is destroyed and its row `failed`; the message is safe to show. */
export class ProvisionError extends Error {
  readonly stage: StageName;
  constructor(stage: StageName, message: string) {
    super(message);
    this.name = 'ProvisionError';
    this.stage = stage;
  }
}

export interface Provisioner {
  /** Runs `provision` and the warm or cold path; moves the sandbox row pending → starting → ready. */
  provision(input: ProvisionInput): Promise<Provisioned>;
  /**
   * Decrypts again, rewrites the env file of a live sandbox and sends its network policy again
   * (the provider host follows the env's base URL). Reattach: with a fresh callback key
   * (the one before is revoked). With `callback` (the account's inference credentials changed
   * while the sandbox was warm): with that key, so processes still running in the sandbox keep a
   * working one.
   */
  refreshEnv(input: ProvisionInput, callback?: CallbackKey): Promise<Provisioned>;
  /** Saves the runtime's session state out of the sandbox (sealed with the tenant key). */
  saveSession(input: {
    lease: OwnerLease;
    sandboxName: string;
    adapter: RuntimeAdapter;
    /** Cancels the save (nothing is stored; the call rejects with the signal's reason). */
    signal?: AbortSignal;
  }): Promise<void>;
  /** Puts the saved session state into a new sandbox; false when there is none. */
  restoreSession(input: {
    lease: OwnerLease;
    sandboxName: string;
    adapter: RuntimeAdapter;
    env: Record<string, string>;
  }): Promise<boolean>;
}

/** Whether some process holds a conversation's ownership lock right now (owner.ts); readers use it to tell a viewer the owner is gone. */
export interface OwnershipProbe {
  isOwned(conversationId: string): Promise<boolean>;
}
