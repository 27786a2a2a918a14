// One provisioning stage as the log shows it: `started`, then `done` | `failed` | `interrupted`
// with its duration, written through the stage's sink (the conversation's LogWriter, or an
// environment checkpoint build's stream); any failure leaves it as a ProvisionError naming the
// stage. Each stage's work is a span `provisioning <stage>` when tracing is on (tracing.ts). Used by
// the provisioner's stages (provisioner.ts) and the runtime stage (runtime-probe.ts).
// The same duration goes to `observe` when given (paddock_provisioning_stage_duration_seconds).
import { performance } from 'node:perf_hooks';
import { SandboxTimeoutError } from '@paddock/sandbox-client';
import type { Logger } from '../../observability/logger.ts';
import { withSpan } from '../../observability/tracing.ts';
import { type LogWriter, ProvisionError, StaleOwnerError } from '../contracts.ts';
import type { StageName } from '../conversations.tables.ts';

/** Where a stage reports to: the conversation's LogWriter, or an environment checkpoint build's stream. */
export type StageSink = Pick<LogWriter, 'output' | 'stage'>;

/** Told how each stage ended and how long it took (the provisioning stage metric). */
export type StageObserver = (
  stage: StageName,
  outcome: 'done' | 'failed' | 'interrupted',
  seconds: number,
) => void;

/** Runs one stage: started → done/failed/interrupted with its duration; errors become ProvisionError. */
export async function runStage<T>(
  sink: StageSink,
  stage: StageName,
  signal: AbortSignal | undefined,
  work: () => Promise<T>,
  logger?: Logger,
  observe?: StageObserver,
): Promise<T> {
  const started = performance.now();
  // Queued, not awaited before the work: the sink keeps rows in the order they were handed in, so
  // `started` still precedes the stage's output and its `done`; its failure is raised below.
  const startedRow = sink.stage({ stage, state: 'started' });
  startedRow.catch(() => {}); // awaited below; never an unhandled rejection meanwhile
  try {
    if (signal?.aborted) throw new ProvisionError(stage, 'provisioning was cancelled');
    // A span per stage (tracing.ts; nothing when tracing is off), the conversation's id from its context.
    const result = await withSpan(`provisioning ${stage}`, { 'paddock.stage': stage }, work);
    await startedRow;
    if (signal?.aborted) throw new ProvisionError(stage, 'provisioning was cancelled');
    // Queued, not awaited: the next step need not wait for this row's commit (the sink keeps the
    // order). A sink that failed stays failed: its next row, or the owner's next fenced write, raises it.
    const durationMs = performance.now() - started;
    sink.stage({ stage, state: 'done', durationMs: Math.round(durationMs) }).catch(() => {});
    observe?.(stage, 'done', durationMs / 1000);
    return result;
  } catch (err) {
    const cancelled = signal?.aborted === true;
    const failure = cancelled
      ? new ProvisionError(stage, 'provisioning was cancelled')
      : toProvisionError(stage, err, logger);
    const durationMs = performance.now() - started;
    const state = cancelled ? 'interrupted' : 'failed';
    observe?.(stage, state, durationMs / 1000);
    await sink
      .stage({ stage, state, durationMs: Math.round(durationMs), message: failure.message })
      .catch(() => {});
    if (err instanceof StaleOwnerError) throw err;
    throw failure;
  }
}

export function toProvisionError(stage: StageName, err: unknown, logger?: Logger): ProvisionError {
  if (err instanceof ProvisionError) return err;
  if (err instanceof SandboxTimeoutError)
    return new ProvisionError(stage, `the sandbox backend did not answer in time (${stage})`);
  // Unknown failures: the detail goes to the server log, the user gets the stage and a pointer.
  logger?.warn({ err, stage }, 'provisioning stage failed');
  return new ProvisionError(
    stage,
    `the ${stage} stage failed: ${(err as Error)?.message ?? 'unknown error'}`,
  );
}
