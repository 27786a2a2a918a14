// `npm test`: starts a throw-away embedded PostgreSQL 17 (durability off for speed),
// migrates one template database, then runs every node:test file. Each server test file
// clones its own database from the template (apps/server/test/helpers/database.ts).
// Test processes get a TMPDIR of the run's own; a test that leaves anything there, a
// `paddock-*` entry in the system temp directory, or a sandbox init still running whose
// sandboxd data dir lies in the run's directory, fails the run (tests clean up what they
// create; the leftover inits are killed).
//   npm test                      every test file
//   npm test -- path/a.test.ts    only the given files
import { spawn } from 'node:child_process';
import { chmodSync, globSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  detachLoopDevicesUnder,
  killSandboxInitsUnder,
  sandboxInitsUnder,
} from '../apps/sandboxd/test/leftovers.ts';
import { prepareSharedLayer, sharedLayerDir } from '../apps/sandboxd/test/runtime-layer-cache.ts';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { startEmbeddedPostgres } from '../apps/server/src/db/embedded.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';
import { ensureConsoleBuilt } from './build-web.ts';

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

/** Entries a test run must not leave behind in a temp directory. */
const LEFTOVER = /^(paddock-(?!test-)|pg-password-)/;
const systemTmp = tmpdir();

// The browser tests drive the built console: build it once here (when missing or stale)
// rather than in several test processes at once.
if (selected.some((f) => f.includes('apps/web/test/'))) {
  try {
    await ensureConsoleBuilt();
  } catch (err) {
    console.error(`npm test: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
const leftovers = (d: string) => readdirSync(d).filter((name) => LEFTOVER.test(name));
const before = new Set(leftovers(systemTmp));

// The sandboxes' runtime layer (agent CLIs), installed once into a cache shared by every test file and
// run (apps/sandboxd/test/runtime-layer-cache.ts); meanwhile the database starts. Tests that need it fail
// naming it when it could not be installed; the others run.
const layer = prepareSharedLayer().then(
  (r) => {
    if (r.seconds > 1) console.error(`npm test: runtime layer installed in ${r.seconds} s: ${r.dir}`);
  },
  (err: unknown) => {
    console.error(
      `npm test: the runtime layer could not be installed into ${sharedLayerDir()}: ${err instanceof Error ? err.message : String(err)}`,
    );
  },
);

const dir = mkdtempSync(join(systemTmp, 'paddock-test-'));
// The database runs as `postgres` when we are root: it must traverse to its cluster here.
chmodSync(dir, 0o711);
const testTmp = join(dir, 'tmp');
mkdirSync(testTmp);
// Like /tmp: tests run some processes as other users (rootless sandboxd).
chmodSync(testTmp, 0o1777);
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
}).catch((err: unknown) => {
  rmSync(dir, { recursive: true, force: true });
  console.error(`npm test: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
let code = 1;
try {
  const template = openDatabase({ connectionString: pg.url, max: 2 });
  await migrate(template.db, template.pool);
  // graphile-worker's own schema (graphile_worker), as the server installs it at boot.
  await migrateJobs(template.pool, createLogger({ level: 'warn' }));
  await template.close();
  await layer;

  const concurrency = Math.max(2, availableParallelism());
  const child = spawn(
    process.execPath,
    ['--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000', ...flags, ...selected],
    {
      stdio: 'inherit',
      env: {
        ...process.env,
        NODE_ENV: 'test',
        // Tests that reach the npm registry or the Debian archive trust the machine's CA store, as
        // curl, git and pip do (a network that intercepts TLS installs its CA there, not in Node's).
        NODE_USE_SYSTEM_CA: process.env['NODE_USE_SYSTEM_CA'] ?? '1',
        TMPDIR: testTmp,
        PADDOCK_TEST_PG_ADMIN_URL: pg.adminUrl,
        PADDOCK_TEST_PG_TEMPLATE: TEMPLATE,
      },
    },
  );
  code = await new Promise<number>((resolve) =>
    child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))),
  );
  // Sandbox inits outlive their sandboxd by design, so a test that loses track of one leaves it running
  // for good. Every data dir of this run lies in `dir` (TMPDIR); other runs and benchmarks have their own.
  if (sandboxInitsUnder(dir).length > 0) {
    // An init killed just before the test process exited may still be on its way out.
    await new Promise((r) => setTimeout(r, 1000));
    const inits = await killSandboxInitsUnder(dir);
    if (inits.length > 0) {
      console.error(
        `\nnpm test: the tests left ${inits.length} sandbox init${inits.length === 1 ? '' : 's'} running (killed now):`,
      );
      for (const { pid, startedAt, sandboxDir } of inits)
        console.error(`  pid ${pid}, started ${startedAt.toISOString()}: ${sandboxDir}`);
      for (const { device, file } of detachLoopDevicesUnder(dir))
        console.error(`  loop device ${device} detached: ${file}`);
      code = code || 1;
    }
  }
  const left = [
    // The run's own TMPDIR must be empty again: whatever is left there, a test left.
    ...readdirSync(testTmp).map((name) => join(testTmp, name)),
    ...leftovers(systemTmp)
      .filter((name) => !before.has(name))
      .map((name) => join(systemTmp, name)),
  ];
  if (left.length > 0) {
    console.error(`\nnpm test: the tests left ${left.length} temporary entries behind:`);
    for (const path of left.slice(0, 20)) console.error(`  ${path}`);
    code = code || 1;
  }
} finally {
  await pg.stop().catch(() => {});
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch (err) {
    // Files a failed sandbox test left with a sandbox's user id cannot be removed by us.
    console.error(
      `npm test: could not remove ${dir} (${(err as NodeJS.ErrnoException).code}); remove it by hand`,
    );
    code = code || 1;
  }
}
process.exit(code);
