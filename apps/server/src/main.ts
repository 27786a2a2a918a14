// paddock-server: `serve` (default), `migrate`, `task <name> [args...]`.
import { ConfigError } from './config/config.ts';
import { loadConfig } from './config/load.ts';
import { migrate } from './db/migrate.ts';
import { openConfiguredDatabase } from './db/open.ts';
import { reportError } from './observability/error-reports.ts';
import { createLogger, resolveLogFormat } from './observability/logger.ts';
import { openDeps, startServer, startTelemetry } from './server.ts';
import { TaskUsageError } from './tasks/task.ts';
import { TASKS } from './tasks/tasks.ts';

const USAGE = `usage: paddock-server [serve | migrate | task <name> [args...] | tasks]`;

async function main(argv: string[]): Promise<number> {
  const [command = 'serve', ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE);
    return 0;
  }
  if (command === 'tasks') {
    for (const task of Object.values(TASKS)) console.log(`${task.usage.padEnd(40)} ${task.description}`);
    return 0;
  }
  if (!['serve', 'migrate', 'task'].includes(command)) {
    console.error(`unknown command "${command}"\n${USAGE}`);
    return 2;
  }

  let loaded: ReturnType<typeof loadConfig>;
  try {
    loaded = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`paddock-server: refusing to boot. ${err.message}`);
      return 78; // EX_CONFIG
    }
    throw err;
  }
  const { config, warnings } = loaded;
  const logger = createLogger({
    level: config.logLevel,
    format: resolveLogFormat(config.logFormat, config.isProduction),
  });
  for (const w of warnings) logger.warn(w);

  // migrate and tasks run beside a running `npm start` on its embedded database (attach).
  if (command === 'migrate') {
    const db = await openConfiguredDatabase(config, logger, { attach: true });
    try {
      const { applied } = await migrate(db.database.db, db.database.pool);
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
    } finally {
      await db.close();
    }
    return 0;
  }

  if (command === 'task') {
    const [name, ...args] = rest;
    const task = name ? TASKS[name] : undefined;
    if (!task) {
      console.error(`unknown task "${name ?? ''}". Available: ${Object.keys(TASKS).join(', ') || '(none)'}`);
      return 2;
    }
    const telemetry = await startTelemetry(config, logger);
    try {
      const { deps, db } = await openDeps(config, logger, undefined, { attach: true });
      try {
        await task.run({ deps, args, print: (line) => console.log(line) });
      } catch (err) {
        if (err instanceof TaskUsageError) {
          console.error(`${err.message}\nusage: paddock-server task ${task.usage}`);
          return 2;
        }
        reportError(err, { tags: { task: name ?? '' } });
        throw err;
      } finally {
        await db.close();
      }
    } finally {
      await telemetry.stop();
    }
    return 0;
  }

  const server = await startServer(config, logger);
  logger.info({ url: server.url }, `Paddock is listening on ${server.url}`);
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    logger.info({ signal }, 'shutting down: draining requests');
    server.stop().then(
      () => {
        logger.info('shutdown complete');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // The terminal it runs in closed: drain and stop as for SIGTERM. Without a handler node dies at
  // once, and an embedded PostgreSQL in the same process group (which reads SIGHUP as "reload")
  // kept running without its server.
  process.on('SIGHUP', onSignal);
  return -1; // keep running
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    console.error(`paddock-server: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
