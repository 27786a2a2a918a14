// The durable job queue: graphile-worker, run inside the server process, sharing the
// server's PostgreSQL pool. Invariants (mail.test.ts):
// - Jobs are enqueued with the SQL function graphile_worker.add_job on the caller's
//   connection, so a job enqueued inside a transaction exists exactly when the state
//   change that caused it commits: a crash never loses it, a rollback never sends it.
// - Handlers are short and idempotent (a job may run twice after a crash mid-flight).
// - graphile-worker's schema migrations run at boot right after ours (migrateJobs), and
//   in the test template database (scripts/test.ts).
import {
  type ParsedCronItem,
  type Runner,
  run,
  runMigrations,
  type TaskList,
  Logger as WorkerLogger,
} from 'graphile-worker';
import { sql } from 'kysely';
import type pg from 'pg';
import type { Db } from '../db/database.ts';
import type { Logger } from '../observability/logger.ts';

export type { TaskList };

function workerLogger(logger: Logger): WorkerLogger {
  const log = logger.child({ component: 'jobs' });
  return new WorkerLogger((scope) => (level, message, meta) => {
    const fields = {
      taskIdentifier: scope.taskIdentifier,
      jobId: scope.jobId,
      ...(meta?.['error'] ? {} : {}),
    };
    if (level === 'error') log.error(fields, message);
    else if (level === 'warning') log.warn(fields, message);
    else log.debug(fields, message);
  });
}

// A pooled client that loses its connection while idle emits 'error' on itself; without a
// listener that would crash the process (graphile-worker checks for this handler).
function guardClientErrors(pool: pg.Pool, logger: Logger): void {
  if (pool.listenerCount('connect') > 0) return;
  pool.on('connect', (client) => {
    client.on('error', (err) => logger.warn({ err: { message: err.message } }, 'database client error'));
  });
}

export async function migrateJobs(pool: pg.Pool, logger: Logger): Promise<void> {
  guardClientErrors(pool, logger);
  await runMigrations({ pgPool: pool, logger: workerLogger(logger) });
}

export interface JobRunner {
  stop(): Promise<void>;
}

export async function startJobRunner(options: {
  pool: pg.Pool;
  logger: Logger;
  tasks: TaskList;
  concurrency?: number;
  pollIntervalMs?: number;
  /** The crontab (cron.ts); its tasks must be in `tasks`. */
  schedule?: ParsedCronItem[];
}): Promise<JobRunner> {
  guardClientErrors(options.pool, options.logger);
  const runner: Runner = await run({
    pgPool: options.pool,
    taskList: options.tasks,
    concurrency: options.concurrency ?? 2,
    pollInterval: options.pollIntervalMs ?? 2000,
    noHandleSignals: true,
    parsedCronItems: options.schedule ?? [],
    logger: workerLogger(options.logger),
  });
  return {
    async stop() {
      await runner.stop();
    },
  };
}

export interface EnqueueOptions {
  runAt?: Date;
  maxAttempts?: number;
  /** Replaces a still-pending job with the same key (graphile-worker job_key). */
  jobKey?: string;
  /** Jobs of one named queue run one after another, across every runner (graphile-worker queue_name). */
  queueName?: string;
}

/** Enqueues on `db`, which may be a transaction: the job commits or rolls back with it. */
export async function enqueueJob(
  db: Db,
  task: string,
  payload: Record<string, unknown>,
  opts: EnqueueOptions = {},
): Promise<void> {
  await sql`SELECT graphile_worker.add_job(
    ${task}::text,
    ${JSON.stringify(payload)}::json,
    queue_name => ${opts.queueName ?? null}::text,
    run_at => ${opts.runAt ?? null}::timestamptz,
    max_attempts => ${opts.maxAttempts ?? null}::int,
    job_key => ${opts.jobKey ?? null}::text
  )`.execute(db);
}
