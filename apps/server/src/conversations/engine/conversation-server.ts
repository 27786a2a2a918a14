// The conversation server: the one place that drives one owned conversation — provision, turns,
// interrupt, terminate, delete, reclaim — holding in memory only what must never be stored
// (the secret registry, the provisioned env with its secrets and callback key).
//
// What must hold (conversations.lifecycle.test.ts: one test per row of the spec's table):
// 1. One loop per server works the turns in seq order (a running turn first: reattach), so two
//    turns of one conversation never overlap; commands only kick the loop or signal the turn.
// 2. Every state the owner writes is fenced by its lease (owner-writes.repo.ts); a status a
//    request decided (terminated) is never overwritten (onlyIf).
// 3. A failed first provisioning fails the conversation (sandbox destroyed, row `failed`); a
//    failed wake of an existing conversation fails the turn and the sandbox but leaves the
//    conversation idle and resumable.
// 4. The server lets ownership go only when nothing live remains (no live sandbox): an idle
//    conversation with a warm sandbox stays owned so its lifecycle clock keeps running.
// 5. The runtime's session state is saved after a turn, by the loop, when no other turn waits
//    (never beside a turn: the archive would be torn), SESSION_SAVE_DELAY_MS after the turn
//    ended: a client that prompts as soon as it sees the end (an agent loop, a script) finds no
//    save in its way. A command that arrives meanwhile cancels the wait or the save, so a
//    follow-up never waits for it; the state stays unsaved until the loop next finds no turn
//    waiting, and that save holds everything the cancelled one would have.
// 6. A sandbox is never reclaimed with a turn's session state unsaved: before destroying it,
//    reclaim saves when the log says a turn ended after the last save (the rows, not this
//    process's memory: a previous owner may have died before its save).
//    Test (conversations.session-state.test.ts): "a reclaim saves the state a lost save left behind".
// 7. A turn on a warm sandbox runs with the account's inference credentials as they are when its
//    round reads them: when they changed since the sandbox's env was made (the round's credentials
//    mark differs), the env is decrypted again, its file rewritten and the network policy sent
//    again (a `limited` environment allows the new base URL's host) first, with the same
//    callback key. So a person who sets the key a failed turn asked for can prompt again in the
//    same conversation. Test (inference-credentials.conversation.test.ts): "a key set or deleted
//    while the sandbox is warm reaches the next turn"; the policy
//    (inference-credentials.egress.test.ts): "no credential, then one on gateway A, then one on
//    gateway B: each next turn reaches its gateway".
// 8. What a turn changed is recorded around it (work/changes-turns.ts): the trees snapshot beside
//    the turn's file writes, before its process starts; the diff after its end is stored, before
//    the next turn starts. A failure of either is logged as a warning and never fails the turn.
//    Test (work.changes.test.ts): "a turn's changes are recorded and survive a reclaim".
import { setTimeout as sleep } from 'node:timers/promises';
import type { SandboxClient } from '@paddock/sandbox-client';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../../db/database.ts';
import { AppError } from '../../http/errors.ts';
import { reportError } from '../../observability/error-reports.ts';
import type { Logger } from '../../observability/logger.ts';
import type { Metrics } from '../../observability/metrics.ts';
import { withConversation, withSpan } from '../../observability/tracing.ts';
import {
  type AgentSnapshot,
  type Feed,
  type LogWriterFactory,
  type OwnerLease,
  ProvisionError,
  type Provisioned,
  type Provisioner,
  type ProvisionInput,
  type RuntimeRegistry,
  type StageEvent,
  StaleOwnerError,
  type TurnGates,
} from '../contracts.ts';
import { redactingLogger } from '../log/redacted-logger.ts';
import { createSecretRegistry } from '../log/redactor.ts';
import type { DestroyQueue } from '../provisioning/destroy-queue.ts';
import { replayDeduplicator } from '../turns/reattach.ts';
import {
  attachTurn,
  INTERRUPT_GRACE_MS,
  startTurn,
  type TurnEnd,
  type TurnIo,
  type TurnRun,
} from '../turns/turn.ts';
import type { TurnChangesRecorder } from '../work/changes-turns.ts';
import {
  ownerEndTurn,
  ownerFailOpenTurns,
  ownerInsertSandbox,
  ownerLiveSandbox,
  ownerRound,
  ownerSessionBehind,
  ownerSetConversation,
  ownerSetExecSession,
  ownerSetSandbox,
  ownerStartTurn,
  turnImages,
  turnStoredCounts,
} from './owner-writes.repo.ts';

export interface ServerDeps {
  db: Db;
  sandbox: SandboxClient;
  /** Every destroy of a sandbox: retried until the backend confirms it. */
  destroys: DestroyQueue;
  provisioner: Provisioner;
  writers: LogWriterFactory;
  feed: Feed;
  runtimes: RuntimeRegistry;
  gates: TurnGates;
  revokeCallbackKeys(conversationId: string): Promise<unknown>;
  newSandboxName(tenantId: string): string;
  logger: Logger;
  metrics: Pick<Metrics, 'turnsStarted' | 'turnsFinished' | 'turnFirstOutput' | 'ownerTakeovers'>;
  /** Records what each turn changed (work/changes-turns.ts); absent: not recorded. */
  changes?: TurnChangesRecorder;
}

type Round = Awaited<ReturnType<typeof ownerRound>>;
type Live = Round['live'];
type Turn = NonNullable<Round['turn']>;
type Conversation = Round['conv'];

/** interruptPending's value for an interrupt command that names no turn. */
const ANY_TURN = '*';

export interface ConversationServer {
  readonly lease: OwnerLease;
  kick(): void;
  /** `turnId`: the turn the request saw queued or running; omitted, whichever turn is next. */
  interrupt(turnId?: string): Promise<void>;
  terminate(): Promise<void>;
  remove(): Promise<void>;
  /** Lifecycle: destroys an idle warm sandbox (idle timeout, max lifetime). */
  reclaim(message: string): Promise<void>;
  /** Provisioning deadline passed: fail the rows, then stop the stuck work. */
  failProvisioning(message: string): Promise<void>;
  /** Leaves the conversation to another process: the turn keeps running in the sandbox. */
  stop(options?: { lost?: boolean }): Promise<void>;
  /** What the lifecycle clock needs: whether a turn runs or provisioning is in progress. */
  busy(): boolean;
}

/**
 * How long after a turn's end its session state is saved (invariant 5): longer than a client
 * takes to answer the end it saw (the conversations benchmark's follow-up, `paddock prompt` in a
 * script: tens to hundreds of ms), far shorter than a person takes to write the next prompt.
 */
export const SESSION_SAVE_DELAY_MS = 1000;

const STAGE_STATE = { succeeded: 'done', failed: 'failed', interrupted: 'interrupted' } as const;

/**
 * A message safe to show a user for an unexpected failure (never the raw error: it may carry
 * secrets). Not yet redacted: the server's reasonOf() passes it through the conversation's redactor.
 */
function safeReason(err: unknown): string {
  if (err instanceof ProvisionError) return err.message;
  if (err instanceof AppError) return err.message;
  return 'the sandbox backend failed';
}

export function createConversationServer(
  deps: ServerDeps,
  lease: OwnerLease,
  onEnd: (server: ConversationServer, crashed: boolean) => void,
  /** The conversation's agent as the lease's bump read it: its gates are read with the first round. */
  hint: { agentId: string | null } = { agentId: null },
): ConversationServer {
  const { db, sandbox } = deps;
  const registry = createSecretRegistry();
  // Its `err` and `reason` fields pass the redactor: a failure's text can carry a secret.
  const log = redactingLogger(deps.logger.child({ conversationId: lease.conversationId }), registry);
  /** safeReason, redacted: what is stored (failure_reason, sandbox reason, turn error) and logged. */
  const reasonOf = (err: unknown): string => registry.redact(safeReason(err)).toString('utf8');
  const writer = deps.writers.create({ lease, registry });
  let provisioned: Provisioned | null = null;
  let current: { id: string; name: string } | null = null;
  /** The credentials mark (ownerRound) of the round whose provisioning or reattach made the env. */
  let envMark: string | null = null;
  let run: TurnRun | null = null;
  let working: Promise<void> | null = null;
  let again = false;
  let stopped = false;
  let provisioning = false;
  let abort = new AbortController();
  /**
   * The turn an interrupt arrived for before its process was running (or re-joined); ANY_TURN
   * when the command named none. An interrupt for a turn that has ended is dropped: a command
   * delivered late never stops the next prompt's turn.
   */
  let interruptPending: string | null = null;
  /** The turn whose process `run` is. */
  let runTurnId: string | null = null;
  const interruptFor = (turnId: string) => interruptPending === ANY_TURN || interruptPending === turnId;
  /** A turn ended since the runtime's session state was last saved: the adapter whose paths to save. */
  let unsaved: ReturnType<RuntimeRegistry> | null = null;
  /** The session save in progress: a command cancels it (invariant 5). */
  let saving: AbortController | null = null;

  const stage = async (event: StageEvent) => {
    await writer.stage({
      ...event,
      ...(event.message ? { message: registry.redact(event.message).toString('utf8') } : {}),
    });
  };
  /** Interrupts the turn; a turn that outlived its grace after SIGTERM is logged (turn.ts invariant 6). */
  const interruptRun = async (turnRun: TurnRun) => {
    if ((await turnRun.interrupt()) === 'killed')
      log.warn(`the turn did not end within ${INTERRUPT_GRACE_MS} ms of SIGTERM: SIGKILL sent`);
  };
  const publishStatus = (status: string) =>
    deps.feed.publish(lease.conversationId, { type: 'status', status });

  /** A turn could not run or re-join: its open turns fail, and a running conversation rests idle (resumable). */
  const failTurnsToIdle = async (reason: string) => {
    await ownerFailOpenTurns(db, lease, 'failed', reason);
    if (
      await ownerSetConversation(db, lease, { status: 'idle', touchActivity: true }, { onlyIf: ['running'] })
    )
      publishStatus('idle');
  };

  /** The agent as it is now, once the continuation gates passed (two independent reads, overlapped). */
  const gatedAgentById = async (agentId: string): Promise<AgentSnapshot> => {
    const [agent] = await Promise.all([
      deps.gates.agent(lease.tenantId, agentId),
      deps.gates.continuation(lease.tenantId),
    ]);
    return agent;
  };
  const gatedAgent = async (conv: Conversation): Promise<AgentSnapshot> => {
    if (!conv.agent_id) throw new AppError('not_found', 'the agent of this conversation was deleted');
    return await gatedAgentById(conv.agent_id);
  };

  const end = async (crashed = false) => {
    if (stopped) return;
    stopped = true;
    await writer.close().catch(() => {});
    await deps.revokeCallbackKeys(lease.conversationId).catch(() => {});
    onEnd(server, crashed);
  };

  const destroy = async (name: string) => {
    await deps.destroys.destroy(lease.tenantId, name);
  };

  /** What the provisioner needs to make (or make again) the env of `sandbox` for `agent`. */
  const provisionInput = (
    sandbox: { id: string; name: string },
    conv: Conversation,
    agent: AgentSnapshot,
  ): ProvisionInput => ({
    lease,
    sandboxId: sandbox.id,
    sandboxName: sandbox.name,
    agent,
    vaultId: conv.vault_id,
    adapter: deps.runtimes(agent.runtime),
    writer,
    registry,
    signal: abort.signal,
  });

  /**
   * The agent as its gates passed at the wake's start, or null when provisioning failed. `early`:
   * that agent and its gates, read with the loop's round (null: read now).
   */
  const provision = async (
    row: NonNullable<Live>,
    conv: Conversation,
    early: Promise<AgentSnapshot> | null,
  ): Promise<AgentSnapshot | null> => {
    const firstWake = conv.status === 'pending';
    provisioning = true;
    try {
      const agent = await (early ?? gatedAgent(conv));
      const input = provisionInput(row, conv, agent);
      provisioned = await withSpan('provisioning', { 'paddock.sandbox.name': row.name }, () =>
        deps.provisioner.provision(input),
      );
      current = { id: row.id, name: row.name };
      if (!firstWake) {
        await deps.provisioner
          .restoreSession({ lease, sandboxName: row.name, adapter: input.adapter, env: provisioned.env })
          .catch((err: unknown) => log.warn({ err: reasonOf(err) }, 'restoring the runtime session failed'));
      }
      return agent;
    } catch (err) {
      if (err instanceof StaleOwnerError || stopped) throw err;
      const reason = reasonOf(err);
      log.warn(
        { reason, stage: err instanceof ProvisionError ? err.stage : 'provision' },
        'provisioning failed',
      );
      if (!(err instanceof ProvisionError))
        await stage({ stage: 'provision', state: 'failed', message: reason });
      await destroy(row.name);
      await ownerSetSandbox(db, lease, row.id, 'failed', reason);
      provisioned = null;
      current = null;
      if (firstWake) {
        await ownerFailOpenTurns(db, lease, 'failed', reason);
        if (
          await ownerSetConversation(
            db,
            lease,
            { status: 'failed', failureReason: reason },
            { onlyIf: ['pending', 'running'] },
          )
        )
          publishStatus('failed');
      } else {
        await failTurnsToIdle(reason);
      }
      return null;
    } finally {
      provisioning = false;
    }
  };

  /**
   * Owner changed while the sandbox lived: verify it and rewrite its env (stage `reattach`). On
   * success, the agent as its gates passed.
   */
  const reattachSandbox = async (
    row: NonNullable<Live>,
    conv: Conversation,
    early: Promise<AgentSnapshot> | null,
  ): Promise<AgentSnapshot | 'gone' | 'failed'> => {
    const t0 = Date.now();
    await stage({ stage: 'reattach', state: 'started' });
    try {
      const info = await sandbox.get(row.name, { retry: true });
      if (!info) {
        await ownerSetSandbox(db, lease, row.id, 'terminated', 'the sandbox was gone');
        await stage({
          stage: 'reattach',
          state: 'failed',
          durationMs: Date.now() - t0,
          message: 'the sandbox was gone; provisioning a new one',
        });
        return 'gone';
      }
      const agent = await (early ?? gatedAgent(conv));
      provisioned = await deps.provisioner.refreshEnv(provisionInput(row, conv, agent));
      current = { id: row.id, name: row.name };
      await stage({ stage: 'reattach', state: 'done', durationMs: Date.now() - t0 });
      return agent;
    } catch (err) {
      if (err instanceof StaleOwnerError || stopped) throw err;
      const reason = reasonOf(err);
      await stage({ stage: 'reattach', state: 'failed', durationMs: Date.now() - t0, message: reason });
      await ownerSetSandbox(db, lease, row.id, 'failed', reason);
      await failTurnsToIdle(reason);
      return 'failed';
    }
  };

  /**
   * `row`: the live sandbox as the loop read it (with the conversation and the turn). False when
   * no sandbox is usable; 'warm' when it already was; else the agent as its gates passed while it
   * was provisioned or re-joined (the turn starts with it instead of reading them again).
   */
  const ensureSandbox = async (
    conv: Conversation,
    row: Live,
    early: Promise<AgentSnapshot> | null,
  ): Promise<false | 'warm' | AgentSnapshot> => {
    if (!row) {
      await ownerFailOpenTurns(db, lease, 'failed', 'no sandbox was admitted for this turn');
      await ownerSetConversation(db, lease, { status: 'idle' }, { onlyIf: ['running'] });
      return false;
    }
    if (row.status === 'ready' && provisioned && current?.id === row.id) return 'warm';
    if (row.status === 'ready') {
      const state = await reattachSandbox(row, conv, early);
      if (state === 'failed') return false;
      if (state !== 'gone') return state;
      await ownerInsertSandbox(db, lease, uuidv7(), deps.newSandboxName(lease.tenantId));
      row = await ownerLiveSandbox(db, lease);
      if (!row) return false;
    }
    return (await provision(row, conv, early)) ?? false;
  };

  const turnIo = (turn: Turn, adapter: ReturnType<RuntimeRegistry>): TurnIo => ({
    sandbox,
    sandboxName: current?.name ?? '',
    turnId: turn.id,
    writer,
    adapter,
    onSession: (sessionId) => {
      ownerSetExecSession(db, lease, turn.id, sessionId).catch((err: unknown) =>
        log.warn({ err: reasonOf(err) }, 'could not record the exec session'),
      );
    },
  });

  const turnRef = (turn: Turn) => ({
    tenantId: lease.tenantId,
    conversationId: lease.conversationId,
    turnId: turn.id,
    sandboxName: current?.name ?? '',
  });

  const finishTurn = async (
    turn: Turn,
    result: TurnEnd,
    startedAt: number,
    adapter: ReturnType<RuntimeRegistry>,
  ) => {
    if (result.status === 'detached') return;
    deps.metrics.turnsFinished.inc({ runtime: adapter.runtime, outcome: result.status });
    await writer.flush();
    await ownerEndTurn(db, lease, turn.id, {
      status: result.status,
      exitCode: result.exitCode,
      // The runtime's own words may carry a secret (turn.ts invariant 7): stored redacted.
      error: result.error === null ? null : registry.redact(result.error).toString('utf8'),
      runtimeSessionId: result.sessionId ?? null,
      usage: result.usage ?? null,
    });
    await stage({
      stage: 'turn',
      state: STAGE_STATE[result.status],
      durationMs: Date.now() - startedAt,
      turnId: turn.id,
      ...(result.error ? { message: result.error } : {}),
    });
    const idle = await ownerSetConversation(
      db,
      lease,
      {
        status: 'idle',
        unread: true,
        touchActivity: true,
        ...(result.sessionId ? { runtimeSessionId: result.sessionId } : {}),
      },
      { onlyIf: ['running', 'pending'] },
    );
    if (idle) publishStatus('idle');
    // Saved by the loop once no turn waits (invariant 5), after `idle`: a client that saw the turn
    // end may prompt at once and is answered 202, not busy.
    if (provisioned && current) unsaved = adapter;
  };

  /** Saves the session state of the turns since the last save, unless a command cancels it. */
  const saveSession = async () => {
    const adapter = unsaved;
    if (!adapter || !provisioned || !current) {
      unsaved = null;
      return;
    }
    const controller = new AbortController();
    saving = controller;
    try {
      await sleep(SESSION_SAVE_DELAY_MS, undefined, { signal: controller.signal, ref: false });
      if (stopped) return; // the next owner saves before it reclaims the sandbox (invariant 6)
      await deps.provisioner.saveSession({
        lease,
        sandboxName: current.name,
        adapter,
        signal: controller.signal,
      });
      unsaved = null;
    } catch (err) {
      if (controller.signal.aborted) {
        log.debug('session save cancelled by a command; saved again once no turn waits');
        return;
      }
      unsaved = null;
      log.warn({ err: reasonOf(err) }, 'saving the runtime session failed');
    } finally {
      saving = null;
    }
  };

  /** Invariant 6: a turn that ended after the last save has its state saved before its sandbox goes. */
  const saveBeforeReclaim = async (row: NonNullable<Live>) => {
    try {
      if (row.status !== 'ready') return;
      const { behind, agentId } = await ownerSessionBehind(db, lease);
      if (!behind || !agentId) return;
      const agent = await deps.gates.agent(lease.tenantId, agentId);
      await deps.provisioner.saveSession({
        lease,
        sandboxName: row.name,
        adapter: deps.runtimes(agent.runtime),
      });
      unsaved = null;
    } catch (err) {
      if (err instanceof StaleOwnerError) throw err;
      log.warn({ err: reasonOf(err) }, 'saving the runtime session before the reclaim failed');
    }
  };

  const failTurnEarly = async (turn: Turn, message: string, status: 'failed' | 'interrupted' = 'failed') => {
    await ownerEndTurn(db, lease, turn.id, { status, exitCode: null, error: message });
    await stage({ stage: 'turn', state: status, turnId: turn.id, message });
    if (
      await ownerSetConversation(
        db,
        lease,
        { status: 'idle', touchActivity: true },
        { onlyIf: ['running', 'pending'] },
      )
    )
      publishStatus('idle');
  };

  /** Invariant 7: the warm sandbox's env again, for the credentials as of `mark`; false: the turn failed. */
  const refreshCredentials = async (
    conv: Conversation,
    turn: Turn,
    agent: AgentSnapshot,
    mark: string,
  ): Promise<boolean> => {
    if (!provisioned || !current) return true;
    try {
      provisioned = await deps.provisioner.refreshEnv(
        provisionInput(current, conv, agent),
        provisioned.callback,
      );
      envMark = mark;
      log.info(
        "the account's inference credentials changed: the sandbox env and network policy were refreshed",
      );
      return true;
    } catch (err) {
      if (err instanceof StaleOwnerError || stopped) throw err;
      await failTurnEarly(
        turn,
        `the account's changed inference credentials could not be given to the sandbox: ${reasonOf(err)}`,
      );
      return false;
    }
  };

  /**
   * `early`: the agent and the continuation gates, read together with the conversation when the
   * sandbox was warm (the loop below); null reads them now. `newMark`: the round's credentials mark
   * when the warm sandbox's env predates it (invariant 7).
   */
  const runTurn = (
    conv: Conversation,
    turn: Turn,
    early: Promise<AgentSnapshot> | null,
    newMark: string | null = null,
  ) => withSpan('turn', { 'paddock.turn_id': turn.id }, () => runTurnNow(conv, turn, early, newMark));

  const runTurnNow = async (
    conv: Conversation,
    turn: Turn,
    early: Promise<AgentSnapshot> | null,
    newMark: string | null,
  ) => {
    // Before `run` is set, whichever way: an interrupt finds the turn it names.
    runTurnId = turn.id;
    let agent: AgentSnapshot;
    try {
      agent = await (early ?? gatedAgent(conv));
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      await failTurnEarly(turn, err.message);
      return;
    }
    lastAgentId = agent.id;
    const adapter = deps.runtimes(agent.runtime);
    const io = turnIo(turn, adapter);
    // A re-joined turn started under the previous owner: its stage's duration counts from then,
    // as the turn's own started_at does, so the timeline and the turn list agree after a restart.
    const startedAt = turn.status === 'running' && turn.started_at ? turn.started_at.getTime() : Date.now();
    if (turn.status === 'running') {
      if (!turn.exec_session_id) {
        await failTurnEarly(turn, "the turn's process could not be found after its server restarted");
        return;
      }
      const stored = await turnStoredCounts(db, lease, turn.id);
      const dedup = replayDeduplicator(stored);
      try {
        run = await attachTurn(
          io,
          turn.exec_session_id,
          dedup.wrap,
          dedup.onInfo,
          () => dedup.remaining().stdout,
          stored.events,
        );
      } catch {
        await failTurnEarly(turn, "the turn's process could not be re-joined");
        return;
      }
    } else {
      if (interruptPending !== null && interruptFor(turn.id)) {
        interruptPending = null;
        await failTurnEarly(turn, 'interrupted before it started', 'interrupted');
        return;
      }
      if (newMark !== null && !(await refreshCredentials(conv, turn, agent, newMark))) return;
      // The images, the turn's `running` row and the conversation's are independent round trips:
      // overlapped. A follow-up prompt marked the conversation `running` already (read above; a
      // successful provisioning does not change it): no write, and no read to tell a status that
      // did not match from a lost lease, for which the fenced turn row answers.
      const [imageRows, started, nowRunning] = await Promise.all([
        turnImages(db, lease.tenantId, turn.id),
        ownerStartTurn(db, lease, turn.id, current?.id ?? ''),
        conv.status === 'running'
          ? false
          : ownerSetConversation(db, lease, { status: 'running' }, { onlyIf: ['pending', 'idle'] }),
      ]);
      if (nowRunning) publishStatus('running');
      // A request ended the turn since the round read it (terminate): it does not run.
      if (!started) return;
      const images = imageRows.map((i) => ({ mediaType: i.media_type, data: i.data }));
      const command = adapter.buildTurn({
        agent,
        prompt: turn.prompt,
        images,
        resumeSessionId: conv.runtime_session_id,
        mcpServers: provisioned?.mcpServers ?? agent.mcpServers,
        turnId: turn.id,
        env: provisioned?.env ?? {},
      });
      // Queued, not awaited before the spawn: the writer keeps rows in the order they were handed
      // in, so this row still precedes every byte of the turn's output (log-writer.ts invariant
      // 4) without the spawn waiting for its commit. Its failure (a stale owner) is raised below.
      const startedRow = stage({ stage: 'turn', state: 'started', turnId: turn.id });
      startedRow.catch(() => {}); // awaited after the spawn; never an unhandled rejection meanwhile
      try {
        // The turn's files are independent of each other: written at once, beside the snapshot
        // of the trees the turn's changes are measured from (invariant 8: never fails the turn).
        await Promise.all([
          ...command.files.map((file) =>
            sandbox.writeFile(io.sandboxName, file.path, file.content, {
              mode: file.mode ?? 0o600,
              mkdirParents: true,
            }),
          ),
          deps.changes
            ?.start(turnRef(turn))
            .catch((err: unknown) =>
              log.warn({ err: reasonOf(err) }, "snapshotting the turn's start failed"),
            ),
        ]);
        run = await startTurn(
          io,
          { argv: command.argv, env: { ...provisioned?.env, ...command.env }, cwd: command.cwd },
          () =>
            deps.metrics.turnFirstOutput.observe(
              { runtime: adapter.runtime },
              (Date.now() - startedAt) / 1000,
            ),
        );
        deps.metrics.turnsStarted.inc({ runtime: adapter.runtime });
      } catch {
        // A spawn that never starts: the turn fails, the conversation goes idle. When the
        // sandbox itself is gone, its row ends so that the next prompt provisions a new one.
        if (current && (await sandbox.get(current.name).catch(() => undefined)) === null) {
          await ownerSetSandbox(db, lease, current.id, 'terminated', 'the sandbox was gone');
          provisioned = null;
          current = null;
        }
        await startedRow;
        await finishTurn(
          turn,
          { status: 'failed', exitCode: null, error: 'the turn could not be started in the sandbox' },
          startedAt,
          adapter,
        );
        return;
      }
      await startedRow;
    }
    if (interruptPending !== null && interruptFor(turn.id)) {
      interruptPending = null;
      void interruptRun(run).catch((err: unknown) => log.warn({ err: reasonOf(err) }, 'interrupt failed'));
    }
    const result = await run.done;
    run = null;
    runTurnId = null;
    await finishTurn(turn, result, startedAt, adapter);
    // An interrupt taken after the process exited, while the end committed, was for this turn:
    // spent here, never carried over to the next prompt's turn. Cleared before anything else is
    // awaited: an interrupt that comes later names the next turn (its request saw that one).
    interruptPending = null;
    // After the end is stored (the turn's end is not delayed), before the next turn starts.
    if (deps.changes && result.status !== 'detached' && current) {
      await deps.changes
        .finish({ ...turnRef(turn), registry })
        .catch((err: unknown) => log.warn({ err: reasonOf(err) }, "recording the turn's changes failed"));
      // One for this turn that arrived while the changes were recorded is spent too; one for the
      // next turn (prompted and interrupted meanwhile) is kept for it.
      if (interruptPending === turn.id) interruptPending = null;
    }
  };

  /** The agent of the last turn that started (at first the lease's): the next one reads it (and its gates) early. */
  let lastAgentId: string | null = hint.agentId;
  const loop = async () => {
    // A loop starts on a command (a follow-up prompt); the rounds after a turn mostly find none.
    let kicked = true;
    while (!stopped) {
      // One read (the conversation, its next turn and its live sandbox: ownerRound) and, in the
      // round a prompt started, the last turn's agent and the continuation gates beside it: used
      // only when the conversation still names that agent, by the turn when its sandbox is warm,
      // else by the provisioning or the reattach that starts now (the gates are read when the
      // sandbox work or the turn starts, not minutes before it).
      const early = kicked && lastAgentId !== null ? gatedAgentById(lastAgentId) : null;
      kicked = false;
      early?.catch(() => {}); // handled by runTurn when used; dropped otherwise
      const { conv, turn, live, credentialsMark } = await ownerRound(db, lease);
      if (conv.status === 'terminated' || conv.status === 'failed') break;
      if (!turn) {
        // A command since this round's reads (`again`): the loop runs again first.
        if (unsaved && !again) await saveSession();
        break;
      }
      const gated = early && conv.agent_id === lastAgentId ? early : null;
      const sandboxFor = await ensureSandbox(conv, live, gated);
      if (!sandboxFor) continue;
      // Provisioned or re-joined in this round: its env has the credentials as of this round's mark.
      if (sandboxFor !== 'warm') envMark = credentialsMark;
      await runTurn(
        conv,
        turn,
        sandboxFor !== 'warm' ? Promise.resolve(sandboxFor) : gated,
        sandboxFor === 'warm' && credentialsMark !== envMark ? credentialsMark : null,
      );
    }
    // A command since this round's reads: kick() runs the loop again, which reads everything anew.
    if (again || stopped) return;
    if (!(await ownerLiveSandbox(db, lease))) await end();
  };

  const kick = () => {
    if (stopped) return;
    if (working) {
      again = true;
      saving?.abort();
      return;
    }
    working = (async () => {
      do {
        again = false;
        try {
          await withConversation(lease.conversationId, loop);
        } catch (err) {
          if (err instanceof StaleOwnerError) {
            log.warn('ownership was taken over: stopping this conversation server');
            await stopNow(true);
            return;
          }
          if (stopped) {
            // Stopped while it worked (a delete during provisioning, the process stopping): the
            // work's calls were aborted on purpose, nothing failed.
            log.info({ reason: reasonOf(err) }, 'conversation server stopped during its work');
            return;
          }
          log.error({ err }, 'conversation server failed');
          reportError(err, { tags: { 'paddock.conversation_id': lease.conversationId } });
          await stopNow(false, true);
          return;
        }
      } while (again && !stopped);
    })().finally(() => {
      working = null;
    });
  };

  const stopNow = async (lost: boolean, crashed = false) => {
    abort.abort();
    saving?.abort();
    run?.detach();
    run = null;
    if (lost) {
      stopped = true;
      onEnd(server, true);
      return;
    }
    await end(crashed);
  };

  writer.failed.then(
    (err) => {
      if (!stopped) {
        log.warn({ err: err.message }, 'the log writer failed: stopping this conversation server');
        void stopNow(err instanceof StaleOwnerError);
      }
    },
    () => {},
  );

  /** Destroys the live sandbox (`row`: as just read; read now when not given) and ends its row. */
  const destroyLive = async (status: 'terminated' | 'failed', reason: string, known?: { row: Live }) => {
    const row = known ? known.row : await ownerLiveSandbox(db, lease);
    const name = row?.name ?? current?.name;
    if (name) await destroy(name);
    if (row) await ownerSetSandbox(db, lease, row.id, status, reason);
    provisioned = null;
    current = null;
  };

  const server: ConversationServer = {
    lease,
    kick,
    busy: () => provisioning || run !== null,

    async interrupt(turnId) {
      if (run) {
        // A command for a turn that has ended meanwhile (delivered late) stops nothing.
        if (turnId === undefined || turnId === runTurnId) await interruptRun(run);
        return;
      }
      interruptPending = turnId ?? ANY_TURN;
      kick();
    },

    async terminate() {
      const t0 = Date.now();
      abort.abort();
      saving?.abort();
      abort = new AbortController();
      await ownerFailOpenTurns(db, lease, 'interrupted', 'the conversation was terminated');
      await stage({ stage: 'terminate', state: 'started' });
      run?.detach();
      run = null;
      await destroyLive('terminated', 'terminated');
      await stage({ stage: 'terminate', state: 'done', durationMs: Date.now() - t0 });
      publishStatus('terminated');
      await working?.catch(() => {});
      await end();
    },

    async remove() {
      abort.abort();
      saving?.abort();
      run?.detach();
      run = null;
      if (current) await destroy(current.name);
      stopped = true;
      await writer.close().catch(() => {});
      onEnd(server, true);
    },

    async reclaim(message) {
      if (provisioning || run || working) return;
      const t0 = Date.now();
      await stage({ stage: 'sandbox', state: 'started', message });
      const row = await ownerLiveSandbox(db, lease);
      if (row) await saveBeforeReclaim(row);
      await destroyLive('terminated', message, { row });
      await stage({ stage: 'sandbox', state: 'done', durationMs: Date.now() - t0, message });
      await end();
    },

    async failProvisioning(message) {
      const row = await ownerLiveSandbox(db, lease);
      if (row) await ownerSetSandbox(db, lease, row.id, 'failed', message);
      await ownerFailOpenTurns(db, lease, 'failed', message);
      await ownerSetConversation(
        db,
        lease,
        { status: 'failed', failureReason: message },
        { onlyIf: ['pending', 'running'] },
      );
      await stage({ stage: 'provision', state: 'failed', message });
      publishStatus('failed');
      abort.abort();
      if (row) await destroy(row.name);
      await end();
    },

    async stop(options = {}) {
      await stopNow(options.lost === true);
    },
  };
  return server;
}
