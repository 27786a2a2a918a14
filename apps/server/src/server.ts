// Boot: config → database → migrate → app → listen. SIGTERM drains within the grace period.
import type { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Config } from './config/config.ts';
import { migrate } from './db/migrate.ts';
import { type ConfiguredDatabase, type OpenOptions, openConfiguredDatabase } from './db/open.ts';
import { createDeps, type Deps, type EngineOptions } from './deps.ts';
import { buildApp } from './http/app.ts';
import { cronItems, cronTasks } from './jobs/cron.ts';
import { SCHEDULED_JOBS } from './jobs/schedule.ts';
import { type JobRunner, migrateJobs, startJobRunner } from './jobs/worker.ts';
import type { Logger } from './observability/logger.ts';
import { createMetrics, startMetricsServer } from './observability/metrics.ts';
import { VERSION } from './version.ts';

export interface RunningServer {
  app: FastifyInstance;
  deps: Deps;
  url: string;
  metricsServer?: Server;
  /** Graceful stop: stop accepting, drain in-flight requests (bounded), close the database. */
  stop(): Promise<void>;
}

export async function openDeps(
  config: Config,
  logger: Logger,
  engine?: EngineOptions,
  open: OpenOptions = {},
): Promise<{ deps: Deps; db: ConfiguredDatabase }> {
  const db = await openConfiguredDatabase(config, logger, open);
  try {
    const { applied } = await migrate(db.database.db, db.database.pool);
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
    await migrateJobs(db.database.pool, logger);
  } catch (err) {
    await db.close();
    throw err;
  }
  const deps = createDeps({
    version: VERSION,
    config,
    logger,
    metrics: createMetrics(),
    database: db.database,
    ...(engine ? { engine } : {}),
  });
  return { deps, db };
}

export async function startServer(
  config: Config,
  logger: Logger,
  engine?: EngineOptions,
): Promise<RunningServer> {
  const { deps, db } = await openDeps(config, logger, engine);
  const app = await buildApp(deps);
  let jobs: JobRunner;
  const scheduled = SCHEDULED_JOBS.filter((job) => job.scheduled?.(config) ?? true);
  try {
    // Jobs (mail, the crontab of SCHEDULED_JOBS) run in this process; mail of a request never
    // waits on them. Every replica runs the crontab: graphile-worker fires each run once.
    jobs = await startJobRunner({
      pool: db.database.pool,
      logger,
      tasks: { ...deps.jobTasks, ...cronTasks(scheduled, deps) },
      schedule: cronItems(scheduled),
      pollIntervalMs: Math.min(2000, Math.max(100, config.mail.retry.baseMs)),
    });
  } catch (err) {
    await db.close();
    throw err;
  }
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    await jobs.stop().catch(() => {});
    await db.close();
    throw err;
  }
  try {
    // Hears commands, starts the lifecycle clock and runs the boot sweep (once per cluster):
    // conversations a dead process left behind are adopted and their turns re-joined.
    await deps.conversationEngine.start();
  } catch (err) {
    await app.close().catch(() => {});
    await jobs.stop().catch(() => {});
    await db.close();
    throw err;
  }
  let metricsServer: Server | undefined;
  if (config.metricsPort !== null) {
    metricsServer = await startMetricsServer(deps.metrics, config.metricsPort, config.host);
    logger.info({ port: config.metricsPort }, 'private metrics listener started');
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${shownHost}:${port}`;

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      const grace = setTimeout(() => {
        logger.warn('shutdown grace period elapsed: closing remaining connections');
        app.server.closeAllConnections();
      }, config.shutdownGraceSeconds * 1000);
      grace.unref();
      try {
        await app.close();
        await jobs.stop().catch((err: unknown) => logger.warn({ err }, 'job runner did not stop cleanly'));
        deps.mailer.close();
        await new Promise<void>((resolve) =>
          metricsServer ? metricsServer.close(() => resolve()) : resolve(),
        );
      } finally {
        clearTimeout(grace);
        await db.close();
      }
    })();
    return stopping;
  };
  return { app, deps, url, ...(metricsServer ? { metricsServer } : {}), stop };
}
