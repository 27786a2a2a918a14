// A transcript of `paddock run … -f` for one whole agent turn against the fake inference
// provider, as a person sees it: a real server, sandboxd (with the runtime layer), PostgreSQL, the
// test git host and the scripted fake provider (apps/server/test/helpers/agents-e2e.ts), and the
// real CLI (apps/cli) as a subprocess. The fake asks the agent to edit a file and run a command with
// its shell tool, then answers.
//
//   node scripts/agent-transcript.ts [claude|codex|gemini|opencode] [--raw]
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import type { Runtime } from '../apps/server/src/agents/agents.tables.ts';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';
import { startAgentsHarness } from '../apps/server/test/helpers/agents-e2e.ts';
import { startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';

const ROOT = resolve(import.meta.dirname, '..');
const runtime = (process.argv.slice(2).find((a) => !a.startsWith('-')) ?? 'claude') as Runtime;
const raw = process.argv.includes('--raw');

const scratch = await startScratchPostgres({ database: 'paddock_template' });
const template = openDatabase({ connectionString: scratch.pg.url, max: 2 });
await migrate(template.db, template.pool);
await migrateJobs(template.pool, createLogger({ level: 'warn' }));
await template.close();
process.env['PADDOCK_TEST_PG_ADMIN_URL'] = scratch.pg.adminUrl;
process.env['PADDOCK_TEST_PG_TEMPLATE'] = 'paddock_template';

const a = await startAgentsHarness({ env: { LOG_LEVEL: 'warn' } }).catch(async (err: unknown) => {
  await scratch.remove();
  throw err;
});
try {
  const user = await a.h.user();
  const setup = await a.setup(user, { runtime });
  a.fake.script(runtime, {
    marker: 'TRANSCRIPT',
    command: "printf 'Reviewed by the agent.\\n' >> app/notes.txt && git -C app diff --stat",
    reply: 'I added a line to app/notes.txt; `git diff --stat` shows the one-line change.',
    usage: { input: 1840, output: 96 },
  });
  const agentName = ((await a.h.api(user, 'GET', `/api/agents/${setup.agentId}`)).body as { name: string })
    .name;
  const vaultName = ((await a.h.api(user, 'GET', `/api/vaults/${setup.vaultId}`)).body as { name: string })
    .name;
  const argv = [
    join(ROOT, 'apps/cli/src/main.ts'),
    'run',
    agentName,
    'TRANSCRIPT: add a line to app/notes.txt, then show the diff',
    '--vault',
    vaultName,
    '-f',
    ...(raw ? ['--raw'] : []),
  ];
  console.log(
    `$ paddock run ${agentName} "TRANSCRIPT: add a line to app/notes.txt, then show the diff" --vault ${vaultName} -f${raw ? ' --raw' : ''}`,
  );
  const code = await new Promise<number>((done) =>
    spawn(process.execPath, argv, {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        HOME: process.env['HOME'] ?? '/tmp',
        PADDOCK_URL: a.h.url,
        PADDOCK_API_KEY: user.apiKey,
        NO_COLOR: '1',
      },
    }).on('exit', (c) => done(c ?? 1)),
  );
  console.log(`[exit ${code}]`);
} finally {
  await a.close();
  await scratch.remove();
}
