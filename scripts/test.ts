// `npm test`: starts a throw-away embedded PostgreSQL 17 (durability off for speed),
// migrates one template database, then runs every node:test file. Each server test file
// clones its own database from the template (apps/server/test/helpers/database.ts).
//   npm test                      every test file
//   npm test -- path/a.test.ts    only the given files
import { spawn } from 'node:child_process';
import { chmodSync, globSync, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { startEmbeddedPostgres } from '../apps/server/src/db/embedded.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';

const TEMPLATE = 'paddock_template';
const PATTERNS = [
  'apps/*/src/**/*.test.ts',
  'apps/*/test/**/*.test.ts',
  'packages/*/src/**/*.test.ts',
  'packages/*/test/**/*.test.ts',
];

const args = process.argv.slice(2);
const files = args.filter((a) => !a.startsWith('-'));
const flags = args.filter((a) => a.startsWith('-'));
const selected = files.length > 0 ? files : PATTERNS.flatMap((p) => globSync(p)).sort();

const dir = mkdtempSync(join(tmpdir(), 'paddock-test-'));
chmodSync(dir, 0o711);
const pg = await startEmbeddedPostgres({
  dataDir: dir,
  database: TEMPLATE,
  postgresFlags: [
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
    '-c',
    'max_connections=400',
    '-c',
    'shared_buffers=256MB',
  ],
});
let code = 1;
try {
  const template = openDatabase({ connectionString: pg.url, max: 2 });
  await migrate(template.db, template.pool);
  // graphile-worker's own schema (graphile_worker), as the server installs it at boot.
  await migrateJobs(template.pool, createLogger({ level: 'warn' }));
  await template.close();

  const concurrency = Math.max(2, availableParallelism());
  const child = spawn(
    process.execPath,
    ['--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000', ...flags, ...selected],
    {
      stdio: 'inherit',
      env: {
        ...process.env,
        NODE_ENV: 'test',
        PADDOCK_TEST_PG_ADMIN_URL: pg.adminUrl,
        PADDOCK_TEST_PG_TEMPLATE: TEMPLATE,
      },
    },
  );
  code = await new Promise<number>((resolve) =>
    child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))),
  );
} finally {
  await pg.stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
