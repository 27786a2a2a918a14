import { resolve } from 'node:path';
import type { Config } from '../config/config.ts';
import type { Logger } from '../observability/logger.ts';
import { assertReachable, type DatabaseHandle, openDatabase, poolOptions } from './database.ts';
import { type EmbeddedDatabase, startEmbeddedPostgres } from './embedded.ts';

export interface ConfiguredDatabase {
  database: DatabaseHandle;
  embedded?: EmbeddedDatabase;
  /** Closes the pool, then stops the embedded server if this process started one. */
  close(): Promise<void>;
}

export interface OpenOptions {
  /**
   * The embedded database of a Paddock already running on the same data directory (`npm start`)
   * is used as it is, not refused: release tasks and `migrate` (db/embedded.ts).
   */
  attach?: boolean;
}

/**
 * DATABASE_URL when set; otherwise (outside production; config refuses production without
 * it) an embedded PostgreSQL 17 under PADDOCK_DATA_DIR, reused across restarts.
 */
export async function openConfiguredDatabase(
  config: Config,
  logger: Logger,
  options: OpenOptions = {},
): Promise<ConfiguredDatabase> {
  let embedded: EmbeddedDatabase | undefined;
  let url = config.database.url;
  if (!url) {
    const dataDir = resolve(config.dataDir);
    // With attach, whether this process starts PostgreSQL or uses a running one is known
    // only afterwards; the line says which.
    if (!options.attach)
      logger.info({ dataDir }, 'DATABASE_URL is not set: starting the embedded PostgreSQL');
    embedded = await startEmbeddedPostgres({
      dataDir,
      ...(options.attach ? { attach: true } : {}),
      onLog: (line) => {
        // Server-side errors are the application's to report; only crashes are news here.
        if (/\b(PANIC|FATAL)\b/.test(line) && !/administrator command/.test(line)) {
          logger.warn({ postgres: line }, 'embedded postgres');
        }
      },
    });
  }
  if (embedded?.attached) {
    logger.info(
      { dataDir: resolve(config.dataDir) },
      'using the embedded PostgreSQL of the Paddock running there',
    );
  } else if (embedded && options.attach) {
    logger.info(
      { dataDir: resolve(config.dataDir) },
      'DATABASE_URL is not set: started the embedded PostgreSQL',
    );
  }
  url ??= embedded!.url;
  const database = openDatabase({ ...poolOptions(config, url), connectionString: url });
  try {
    await assertReachable(database.pool);
  } catch (err) {
    await database.close().catch(() => {});
    await embedded?.stop().catch(() => {});
    throw err;
  }
  return {
    database,
    ...(embedded ? { embedded } : {}),
    close: async () => {
      await database.close().catch(() => {});
      await embedded?.stop().catch(() => {});
    },
  };
}
