// `npm run bench -- changes`: GET /api/conversations/:id/changes of a 1,000-file repository with
// 200 changed files (issue 41). A real sandboxd and PostgreSQL, the scripted runtime, and a fake
// git host over https that the environment clones from; one turn changes 200 files (150 edited,
// 25 deleted, 25 added). As medians of --runs (7), each after a short pause:
//   first byte   the request to its response headers (the listing is computed, then sent)
//   full list    the request to the parsed body (every file with its stats)
//   one file     GET …/changes?repo=&file= (the listing, then that file's diff)
// and, as the baselines measured in the same runs through packages/sandbox-client:
//   bare exec          `true` in the same sandbox
//   bare git status    `git status --porcelain` of the repository (git's own cost of looking)
//
//   node scripts/bench-changes.ts [--runs 7] [--json out.json]
import net from 'node:net';
import { parseArgs } from 'node:util';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';
import { startConversationHarness } from '../apps/server/test/helpers/conversations.ts';
import { startFakeGitHost } from '../apps/server/test/helpers/git-server.ts';
import { startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { createSandboxClient } from '../packages/sandbox-client/src/index.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '7' }, json: { type: 'string' } },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 3) throw new Error('--runs must be an integer ≥ 3');
const FILES = 1000;
const quiet = () => new Promise((r) => setTimeout(r, 300));

const scratch = await startScratchPostgres({ database: 'paddock_template' });
const template = openDatabase({ connectionString: scratch.pg.url, max: 2 });
await migrate(template.db, template.pool);
await migrateJobs(template.pool, createLogger({ level: 'warn' }));
await template.close();
process.env['PADDOCK_TEST_PG_ADMIN_URL'] = scratch.pg.adminUrl;
process.env['PADDOCK_TEST_PG_TEMPLATE'] = 'paddock_template';

const gitServer = net.createServer();
await new Promise<void>((resolve) => gitServer.listen(0, '127.0.0.1', resolve));
const address = gitServer.address();
const port = typeof address === 'object' && address ? address.port : 0;
const git = startFakeGitHost(gitServer);
const files: Record<string, string> = {};
for (let i = 0; i < FILES; i++) {
  files[`src/m${Math.floor(i / 50)}/file-${i}.ts`] = Array.from(
    { length: 40 },
    (_, n) => `export const v${n} = ${i * 40 + n}; // line ${n}`,
  ).join('\n');
}
git.addRepo('bench/big', [{ files }]);

const harness = await startConversationHarness({
  env: { LOG_LEVEL: 'warn' },
  sandboxdEnv: { SANDBOXD_SERVICE_ROUTES: `git.test=127.0.0.1:${port}` },
  engine: { gitEnv: { GIT_SSL_NO_VERIFY: 'true' } },
});
const client = createSandboxClient({ baseUrl: harness.sandboxd.url, token: harness.sandboxd.token });
const figures: Figure[] = [];
try {
  const user = await harness.user();
  const environment = await harness.environment(user, {
    repos: [{ url: `https://git.test:${port}/bench/big.git` }],
  });
  const agent = await harness.agent(user, { environment_id: environment });
  // 150 edited (a line changed, one added), 25 deleted, 25 added: 200 changed files.
  const turn = [
    'set -e',
    'cd big',
    'for i in $(seq 0 149); do f=src/m$((i / 50))/file-$i.ts; sed -i "s/line 7$/line seven/" "$f"; echo "// edited" >> "$f"; done',
    'for i in $(seq 150 174); do rm src/m$((i / 50))/file-$i.ts; done',
    'mkdir -p src/new; for i in $(seq 0 24); do seq 1 40 > src/new/added-$i.ts; done',
  ].join('\n');
  const conv = await harness.start(user, { agent_id: agent, prompt: turn });
  const t = await harness.waitForTurn(user, conv.id, 1, 300_000);
  if (t.status !== 'succeeded') throw new Error(`the turn ${t.status}: ${t.error}`);
  const sandboxName = (
    await harness.deps.db
      .selectFrom('sandboxes')
      .select('name')
      .where('conversation_id', '=', conv.id)
      .where('status', '=', 'ready')
      .executeTakeFirstOrThrow()
  ).name;
  const url = `${harness.url}/api/conversations/${conv.id}/changes`;
  const firstByte: number[] = [];
  const full: number[] = [];
  const oneFile: number[] = [];
  const bareExec: number[] = [];
  const bareStatus: number[] = [];
  for (let run = 0; run < runs; run++) {
    await quiet();
    let started = performance.now();
    await client.exec(sandboxName, { cmd: ['true'] });
    bareExec.push(performance.now() - started);
    await quiet();
    started = performance.now();
    await client.exec(sandboxName, { cmd: ['git', '-C', '/home/sandbox/big', 'status', '--porcelain'] });
    bareStatus.push(performance.now() - started);
    await quiet();
    started = performance.now();
    const res = await fetch(url, { headers: user.auth });
    firstByte.push(performance.now() - started);
    const body = (await res.json()) as { repositories: { files: unknown[] }[] };
    full.push(performance.now() - started);
    const listed = body.repositories[0]?.files.length ?? 0;
    if (res.status !== 200 || listed !== 200)
      throw new Error(`/changes answered ${res.status} with ${listed} files`);
    await quiet();
    started = performance.now();
    const one = await fetch(`${url}?repo=big&file=${encodeURIComponent('src/m0/file-0.ts')}`, {
      headers: user.auth,
    });
    await one.json();
    oneFile.push(performance.now() - started);
  }
  const bare = median(bareExec);
  figures.push(
    { name: 'bare exec (true)', unit: 'ms', median: bare, samples: bareExec },
    { name: 'bare git status', unit: 'ms', median: median(bareStatus), samples: bareStatus },
    {
      name: '/changes first byte',
      unit: 'ms',
      median: median(firstByte),
      samples: firstByte,
      baseline: 'bare git status',
      ratio: median(firstByte) / median(bareStatus),
    },
    {
      name: '/changes full list (200 files)',
      unit: 'ms',
      median: median(full),
      samples: full,
      baseline: 'bare git status',
      ratio: median(full) / median(bareStatus),
    },
    { name: '/changes one file diff', unit: 'ms', median: median(oneFile), samples: oneFile },
  );
} finally {
  await harness.close();
  git.close();
  gitServer.close();
  await scratch.remove();
}
writeReport({ benchmark: 'changes', runs, files: FILES, changed: 200 }, figures, { json: values.json });
