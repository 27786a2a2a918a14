// Builds the real app (real config parser, real database, real deps) for inject-based
// HTTP tests. Logs are captured so tests can assert that no secret reaches a log line.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { type Config, type Env, parseConfig } from '../../src/config/config.ts';
import { createDeps, type Deps } from '../../src/deps.ts';
import { buildApp } from '../../src/http/app.ts';
import { createLogger, type LogFormat } from '../../src/observability/logger.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { VERSION } from '../../src/version.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

export interface TestApp {
  app: FastifyInstance;
  deps: Deps;
  config: Config;
  database: TestDatabase;
  /** Every log line written so far, as written (raw JSON text unless logFormat says otherwise). */
  logs: string[];
  close(): Promise<void>;
}

export function testEnv(overrides: Env = {}): Env {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'debug',
    MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
    EMAIL_DELIVERY: 'none',
    RATE_LIMIT_MAX: '100000',
    AUTH_RATE_LIMIT_MAX: '100000',
    LOGIN_FAILURE_MAX: '100000',
    MAIL_PER_RECIPIENT_PER_HOUR: '100000',
    ...overrides,
  };
}

export async function buildTestApp(
  options: {
    env?: Env;
    database?: TestDatabase;
    /** The log format (default json, one object per line in `logs`). */
    logFormat?: LogFormat;
    /** Extra routes registered before the app is ready (test-only behaviour: a failing handler). */
    routes?: (app: FastifyInstance) => void;
  } = {},
): Promise<TestApp> {
  const database = options.database ?? (await createTestDatabase());
  const { config } = parseConfig(
    testEnv({ DATABASE_URL: database.url, DATABASE_SSL: 'false', ...options.env }),
  );
  const logs: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const logger = createLogger({
    level: config.logLevel,
    destination,
    ...(options.logFormat ? { format: options.logFormat } : {}),
  });
  const deps = createDeps({
    version: VERSION,
    config,
    logger,
    metrics: createMetrics(),
    database: database.handle,
  });
  const app = await buildApp(deps);
  options.routes?.(app);
  await app.ready();
  return {
    app,
    deps,
    config,
    database,
    logs,
    close: async () => {
      await app.close();
      if (!options.database) await database.drop();
    },
  };
}
