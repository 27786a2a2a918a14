// A PostgreSQL of one's own (for tests that stop the database, and for benchmarks) and
// the real app on any database URL: the one place that wires config → pool → migrate →
// deps → app outside `npm test`'s template databases.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type Env, parseConfig } from '../../src/config/config.ts';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { type EmbeddedDatabase, type EmbeddedOptions, startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createDeps, type Deps } from '../../src/deps.ts';
import { buildApp } from '../../src/http/app.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { VERSION } from '../../src/version.ts';
import { testEnv } from './app.ts';

export interface ScratchPostgres {
  dir: string;
  /** Replace it when restarting the server on `dir`; remove() stops whichever is current. */
  pg: EmbeddedDatabase;
  /** Stops the server and removes its data directory. */
  remove(): Promise<void>;
}

export async function startScratchPostgres(
  options: Omit<EmbeddedOptions, 'dataDir'> = {},
): Promise<ScratchPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-scratch-'));
  const scratch: ScratchPostgres = {
    dir,
    pg: await startEmbeddedPostgres({ dataDir: dir, ...options }),
    remove: async () => {
      // As root the cluster may live outside `dir` (embedded.ts, clusterLocation).
      await scratch.pg.destroy().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return scratch;
}

export interface AppOnDatabase {
  app: FastifyInstance;
  deps: Deps;
  database: DatabaseHandle;
  close(): Promise<void>;
}

/** The real app, silent, on `url` (migrated first). `env` overrides the test defaults. */
export async function appOnDatabase(url: string, env: Env = {}, poolMax = 10): Promise<AppOnDatabase> {
  const { config } = parseConfig(
    testEnv({ DATABASE_URL: url, DATABASE_SSL: 'false', LOG_LEVEL: 'silent', ...env }),
  );
  const database = openDatabase({ connectionString: url, max: poolMax, connectionTimeoutMillis: 3000 });
  await migrate(database.db, database.pool);
  const deps = createDeps({
    version: VERSION,
    config,
    logger: createLogger({ level: config.logLevel }),
    metrics: createMetrics(),
    database,
  });
  const app = await buildApp(deps);
  await app.ready();
  return {
    app,
    deps,
    database,
    close: async () => {
      await app.close();
      await database.close();
    },
  };
}
