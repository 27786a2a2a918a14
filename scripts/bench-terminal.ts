// `npm run bench -- terminal`: the terminal's keystroke echo round trip (issue 41): one key
// sent, until its echo is back, p50 and p99 over --keys keys. In the terminal `cat` runs (the
// TTY's line discipline echoes each key at once), so the figure is the path, not the shell.
//   through the service  the browser/CLI protocol: WebSocket to the server, its redactor (with
//                        the conversation's secrets registered), the TTY exec on sandboxd
//   baseline             the same TTY exec straight on sandboxd (sandbox-client), in the same run
// The service's added cost is the difference.
import { parseArgs } from 'node:util';
import { createSandboxClient } from '@paddock/sandbox-client';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';
import { startConversationHarness } from '../apps/server/test/helpers/conversations.ts';
import { startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { openTerminal } from '../apps/server/test/helpers/terminal-client.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: { keys: { type: 'string', default: '300' }, json: { type: 'string' } },
});
const keys = Number(values.keys);
if (!Number.isInteger(keys) || keys < 10) throw new Error('--keys must be an integer ≥ 10');

const percentile = (samples: number[], p: number): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
};

/** Sends `keys` keys one after the other, each once the previous one's echo is back. */
async function roundTrips(send: (key: string) => void, seen: () => number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < keys; i++) {
    const before = seen();
    const started = performance.now();
    send('k');
    while (seen() === before) await new Promise<void>((r) => setImmediate(r));
    samples.push(performance.now() - started);
  }
  return samples;
}

const scratch = await startScratchPostgres({ database: 'paddock_template' });
const template = openDatabase({ connectionString: scratch.pg.url, max: 2 });
await migrate(template.db, template.pool);
await migrateJobs(template.pool, createLogger({ level: 'warn' }));
await template.close();
process.env['PADDOCK_TEST_PG_ADMIN_URL'] = scratch.pg.adminUrl;
process.env['PADDOCK_TEST_PG_TEMPLATE'] = 'paddock_template';

const harness = await startConversationHarness({ env: { LOG_LEVEL: 'warn' } });
const client = createSandboxClient({ baseUrl: harness.sandboxd.url, token: harness.sandboxd.token });
const figures: Figure[] = [];
try {
  const user = await harness.user();
  const environment = await harness.environment(user);
  await harness.api(user, 'POST', `/api/environments/${environment}/secrets`, {
    key: 'BENCH_SECRET',
    value: 'bench-Secret-0123456789',
  });
  const agent = await harness.agent(user, { environment_id: environment });
  const conv = await harness.start(user, { agent_id: agent, prompt: 'true' });
  await harness.waitForTurn(user, conv.id, 1, 120_000);
  const sandboxName = (await harness.get(user, conv.id)).sandbox?.name;
  if (!sandboxName) throw new Error('no sandbox');

  // Baseline: the TTY exec on the backend itself.
  let bareBytes = 0;
  let bareText = '';
  const bare = await client.execStream(sandboxName, {
    cmd: ['cat'],
    tty: true,
    onStdout: (chunk) => {
      bareBytes += chunk.length;
      if (bareText.length < 100) bareText += chunk.toString();
    },
  });
  await new Promise((r) => setTimeout(r, 300));
  const bareSamples = await roundTrips(
    (key) => void bare.write(key),
    () => bareBytes,
  );
  bare.close();

  // Through the service.
  const opened = await openTerminal(harness.url, conv.id, user.auth);
  if (!('client' in opened)) throw new Error(`terminal refused: ${opened.status}`);
  const t = opened.client;
  t.write('exec cat\r');
  await t.waitFor('exec cat');
  await new Promise((r) => setTimeout(r, 500));
  const serviceSamples = await roundTrips(
    (key) => t.write(key),
    () => t.output.length,
  );
  t.close();

  for (const [name, samples] of [
    ['keystroke echo round trip: baseline (TTY exec on sandboxd)', bareSamples],
    ['keystroke echo round trip: through the service (WebSocket, redactor)', serviceSamples],
  ] as const) {
    figures.push({ name: `${name}, p50`, unit: 'ms', median: median(samples), samples });
    figures.push({ name: `${name}, p99`, unit: 'ms', median: percentile(samples, 99), samples: [] });
  }
} finally {
  await harness.close();
  await scratch.remove();
}
writeReport({ benchmark: 'terminal', keys }, figures, { json: values.json });
