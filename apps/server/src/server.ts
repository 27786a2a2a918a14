// Boot: config → database → migrate → app → listen. SIGTERM drains within the grace period.
import type { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Config } from './config/config.ts';
import { trackEveryRegistry } from './conversations/log/redactor.ts';
import { migrate } from './db/migrate.ts';
import { type ConfiguredDatabase, type OpenOptions, openConfiguredDatabase } from './db/open.ts';
import { createDeps, type Deps, type EngineOptions } from './deps.ts';
import { buildApp } from './http/app.ts';
import { cronItems, cronTasks } from './jobs/cron.ts';
import { SCHEDULED_JOBS } from './jobs/schedule.ts';
import { type JobRunner, migrateJobs, startJobRunner, type TaskList } from './jobs/worker.ts';
import {
  type ErrorReportsHandle,
  reportError,
  type Scrubber,
  startErrorReports,
  valuesScrubber,
} from './observability/error-reports.ts';
import type { Logger } from './observability/logger.ts';
import { createMetrics, startMetricsServer } from './observability/metrics.ts';
import { startTracing, type TracingHandle, withSpan } from './observability/tracing.ts';
import { VERSION } from './version.ts';

export interface RunningServer {
  app: FastifyInstance;
  deps: Deps;
  url: string;
  metricsServer?: Server;
  /** Graceful stop: stop accepting, drain in-flight requests (bounded), close the database. */
  stop(): Promise<void>;
}

export interface Telemetry {
  tracing: TracingHandle | null;
  errorReports: ErrorReportsHandle | null;
  /** Flushes what is queued and stops both (shutdown). */
  stop(): Promise<void>;
}

/** The deployment's own credentials, as they could appear in an error's text. */
export function configSecrets(config: Config): string[] {
  const values: (string | undefined)[] = [
    config.secretKeyBase,
    config.masterSecretsKey?.toString('base64url'),
    config.masterSecretsKeyPrevious?.toString('base64url'),
    config.sandbox.token,
    config.oauth.github?.clientSecret,
    config.billing.webhookSecret,
  ];
  const mail = config.mail.transport;
  if (mail.kind === 'smtp') values.push(mail.password);
  if (mail.kind === 'api') values.push(mail.apiKey);
  if (config.database.url) {
    try {
      const password = new URL(config.database.url).password;
      if (password) values.push(password, decodeURIComponent(password));
    } catch {
      // not a URL: nothing to take from it
    }
  }
  return values.filter((v): v is string => typeof v === 'string' && v !== '');
}

/**
 * Starts trace export (OTEL_EXPORTER_OTLP_ENDPOINT) and error reports (ERROR_TRACKING_DSN), each
 * only when its variable is set: unset, neither SDK is loaded (observability/tracing.ts,
 * error-reports.ts). Before the dependencies are built: the sandbox client and the app are traced
 * as they are made.
 */
export async function startTelemetry(config: Config, logger: Logger): Promise<Telemetry> {
  const tracing = config.otelExporterOtlpEndpoint
    ? await startTracing({
        endpoint: config.otelExporterOtlpEndpoint,
        version: VERSION,
        sampler: config.tracesSampler,
      })
    : null;
  if (tracing) logger.info('trace export is on (OTEL_EXPORTER_OTLP_ENDPOINT)');
  let errorReports: ErrorReportsHandle | null = null;
  if (config.errorTrackingDsn) {
    const scrubbers: Scrubber[] = [trackEveryRegistry(), valuesScrubber(configSecrets(config))];
    errorReports = await startErrorReports({
      dsn: config.errorTrackingDsn,
      version: VERSION,
      environment: config.nodeEnv,
      scrubbers,
    });
    logger.info('error reports are on (ERROR_TRACKING_DSN)');
  }
  return {
    tracing,
    errorReports,
    stop: async () => {
      await errorReports?.stop().catch(() => {});
      await tracing?.stop().catch(() => {});
    },
  };
}

/** Each job a span `job <name>`, and its failure reported, when telemetry is on; else the tasks as they are. */
export function observedTasks(
  tasks: TaskList,
  telemetry: Pick<Telemetry, 'tracing' | 'errorReports'>,
): TaskList {
  if (!telemetry.tracing && !telemetry.errorReports) return tasks;
  const observed: TaskList = {};
  for (const [name, task] of Object.entries(tasks)) {
    if (!task) continue;
    observed[name] = (payload, helpers) =>
      withSpan(`job ${name}`, { 'paddock.job': name }, async () => {
        try {
          return await task(payload, helpers);
        } catch (err) {
          reportError(err, { tags: { job: name } });
          throw err;
        }
      });
  }
  return observed;
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
  const telemetry = await startTelemetry(config, logger);
  let opened: Awaited<ReturnType<typeof openDeps>>;
  try {
    opened = await openDeps(config, logger, engine);
  } catch (err) {
    await telemetry.stop();
    throw err;
  }
  const { deps } = opened;
  // Closing the database also stops the telemetry (its queued spans and reports flushed).
  const db = {
    close: async () => {
      await opened.db.close();
      await telemetry.stop();
    },
    database: opened.db.database,
  };
  const app = await buildApp(deps);
  let jobs: JobRunner;
  const scheduled = SCHEDULED_JOBS.filter((job) => job.scheduled?.(config) ?? true);
  try {
    // Jobs (mail, the crontab of SCHEDULED_JOBS) run in this process; mail of a request never
    // waits on them. Every replica runs the crontab: graphile-worker fires each run once.
    jobs = await startJobRunner({
      pool: db.database.pool,
      logger,
      tasks: observedTasks({ ...deps.jobTasks, ...cronTasks(scheduled, deps) }, telemetry),
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
