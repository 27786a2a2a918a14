import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseConfig } from '../src/config/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { type EmbeddedDatabase, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { createDeps } from '../src/deps.ts';
import { buildApp } from '../src/http/app.ts';
import { createLogger } from '../src/observability/logger.ts';
import { createMetrics } from '../src/observability/metrics.ts';
import { VERSION } from '../src/version.ts';
import { testEnv } from './helpers/app.ts';

// A database of its own that the test stops and starts again under a running app.
describe('readiness while the database goes down and comes back', () => {
  let dir: string;
  let pg: EmbeddedDatabase;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'paddock-ready-'));
    const { chmodSync } = await import('node:fs');
    chmodSync(dir, 0o711);
    pg = await startEmbeddedPostgres({ dataDir: dir, postgresFlags: ['-c', 'fsync=off'] });
  });
  after(async () => {
    await pg.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 503 quickly while down, /health stays 200, and recovers without a restart', async () => {
    const { config } = parseConfig(
      testEnv({ DATABASE_URL: pg.url, DATABASE_SSL: 'false', LOG_LEVEL: 'silent' }),
    );
    const database = openDatabase({ connectionString: pg.url, max: 4, connectionTimeoutMillis: 3000 });
    await migrate(database.db, database.pool);
    const deps = createDeps({
      version: VERSION,
      config,
      logger: createLogger({ level: 'silent' }),
      metrics: createMetrics(),
      database,
    });
    const app = await buildApp(deps);
    try {
      assert.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200);

      await pg.stop();
      const started = performance.now();
      const down = await app.inject({ method: 'GET', url: '/health/ready' });
      const elapsed = performance.now() - started;
      assert.equal(down.statusCode, 503);
      assert.deepEqual(down.json(), { checks: { database: 'error' }, status: 'error' });
      assert.ok(elapsed < 5000, `readiness took ${elapsed} ms while the database was down`);
      assert.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200);

      // The same cluster comes back on the same address; the app's pool reconnects by itself.
      pg = await startEmbeddedPostgres({ dataDir: dir, port: pg.port, postgresFlags: ['-c', 'fsync=off'] });
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = (await app.inject({ method: 'GET', url: '/health/ready' })).statusCode;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(status, 200);
    } finally {
      await app.close();
      await database.close();
    }
  });
});
