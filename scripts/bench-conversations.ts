// Conversation benchmark: the service's share of "prompt → first output byte on SSE".
//
// With the scripted runtime (the prompt is the turn's shell script) against a real sandboxd and
// PostgreSQL, it measures, as medians of several runs:
//   cold       POST /api/conversations → first stdout event on the SSE stream
//   warm       the same on an environment with a checkpoint (stage checkpoint_restore)
//   follow-up  POST /api/conversations/:id/prompts → first stdout event of that turn
// and, in the same run, the bare backend doing the same work through packages/sandbox-client:
//   bare create+exec        create a sandbox, exec the same program, first stdout byte
//   bare create+restore+exec the same with a checkpoint restore before the exec
//   bare exec               exec in an existing sandbox, first stdout byte
//   bare detachable exec    the same, detachable as a turn is (reported, not subtracted)
// The service overhead is the difference of the medians (goals, design/performance.md:
// ≤ 150 ms cold, ≤ 50 ms warm, ≤ 30 ms follow-up).
//
//   node scripts/bench-conversations.ts [--runs 7] [--json out.json]
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';
import { startConversationHarness } from '../apps/server/test/helpers/conversations.ts';
import type { TestUser } from '../apps/server/test/helpers/factories.ts';
import { startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { createSandboxClient, type SandboxClient } from '../packages/sandbox-client/src/index.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' },
    json: { type: 'string' },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 3) throw new Error('--runs must be an integer ≥ 3');

const PROGRAM = 'echo first-byte';

/** Opens the SSE stream and resolves with the time the first stdout event after `after` arrives. */
async function firstStdout(url: string, user: TestUser, id: string, after?: string): Promise<number> {
  const controller = new AbortController();
  const res = await fetch(`${url}/api/conversations/${id}/stream?streams=stdout`, {
    headers: { ...user.auth, accept: 'text/event-stream', ...(after ? { 'last-event-id': after } : {}) },
    signal: controller.signal,
  });
  if (res.status !== 200 || !res.body) throw new Error(`stream answered ${res.status}`);
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of res.body) {
      text += decoder.decode(chunk as Uint8Array, { stream: true });
      if (/(^|\n)event: stdout\n/.test(text)) return performance.now();
    }
  } finally {
    controller.abort();
  }
  throw new Error('the stream ended before any stdout event');
}

/** The last event id of a conversation so far (to follow only what comes next). */
async function lastEventId(url: string, user: TestUser, id: string): Promise<string | undefined> {
  let after: string | undefined;
  for (;;) {
    const res = await fetch(
      `${url}/api/conversations/${id}/events?limit=500${after ? `&after=${after}` : ''}`,
      { headers: user.auth },
    );
    const page = (await res.json()) as { data: { id: string }[]; meta: { has_more: boolean } };
    const last = page.data.at(-1);
    if (last) after = last.id;
    if (!page.meta.has_more) return after;
  }
}

async function bareFirstByte(client: SandboxClient, name: string, detachable = false): Promise<number> {
  const started = performance.now();
  let first = 0;
  const handle = await client.execStream(name, {
    cmd: ['sh', '-c', PROGRAM],
    ...(detachable ? { detachable: true } : {}),
    onStdout: () => {
      if (!first) first = performance.now();
    },
  });
  await handle.exited;
  if (!first) throw new Error('the bare exec printed nothing');
  return first - started;
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
  const agent = await harness.agent(user);
  const environment = await harness.environment(user);
  const warmAgent = await harness.agent(user, { environment_id: environment });
  const built = await harness.api(user, 'POST', `/api/environments/${environment}/checkpoint`, {});
  if (built.status !== 201)
    throw new Error(`checkpoint answered ${built.status}: ${JSON.stringify(built.body)}`);

  const startToFirstByte = async (agentId: string): Promise<{ ms: number; id: string }> => {
    const started = performance.now();
    const res = await harness.api(user, 'POST', '/api/conversations', { agent_id: agentId, prompt: PROGRAM });
    if (res.status !== 201) throw new Error(`start answered ${res.status}: ${JSON.stringify(res.body)}`);
    const id = (res.body as { id: string }).id;
    const at = await firstStdout(harness.url, user, id);
    return { ms: at - started, id };
  };
  const settle = async (id: string) => {
    await harness.waitFor(user, id, (c) => c.status === 'idle' || c.status === 'failed', 60_000);
  };

  // Warm-up of both paths (first-use costs are not what is measured).
  for (const agentId of [agent, warmAgent]) {
    const { id } = await startToFirstByte(agentId);
    await settle(id);
    await harness.api(user, 'DELETE', `/api/conversations/${id}`);
  }

  const cold: number[] = [];
  const warm: number[] = [];
  const followUp: number[] = [];
  for (let run = 0; run < runs; run++) {
    const c = await startToFirstByte(agent);
    cold.push(c.ms);
    await settle(c.id);
    // Follow-up on the warm sandbox of the cold conversation.
    const after = await lastEventId(harness.url, user, c.id);
    const started = performance.now();
    const stream = firstStdout(harness.url, user, c.id, after);
    const prompted = await harness.api(user, 'POST', `/api/conversations/${c.id}/prompts`, {
      prompt: PROGRAM,
    });
    if (prompted.status !== 202) throw new Error(`prompt answered ${prompted.status}`);
    followUp.push((await stream) - started);
    await settle(c.id);
    await harness.api(user, 'DELETE', `/api/conversations/${c.id}`);

    const w = await startToFirstByte(warmAgent);
    warm.push(w.ms);
    await settle(w.id);
    await harness.api(user, 'DELETE', `/api/conversations/${w.id}`);
  }

  // The bare backend, same run, same program.
  const bareCold: number[] = [];
  const bareWarm: number[] = [];
  const bareExec: number[] = [];
  const bareDetachable: number[] = [];
  const source = `bench-src-${randomBytes(4).toString('hex')}`;
  await client.create(source);
  const checkpoint = await client.createCheckpoint(source);
  for (let run = 0; run < runs; run++) {
    const name = `bench-${randomBytes(4).toString('hex')}`;
    let started = performance.now();
    await client.create(name);
    bareCold.push(performance.now() - started + (await bareFirstByte(client, name)));
    bareExec.push(await bareFirstByte(client, name));
    bareDetachable.push(await bareFirstByte(client, name, true));
    await client.destroy(name);

    const restored = `bench-${randomBytes(4).toString('hex')}`;
    started = performance.now();
    await client.create(restored);
    await client.restoreCheckpoint(restored, checkpoint.id);
    bareWarm.push(performance.now() - started + (await bareFirstByte(client, restored)));
    await client.destroy(restored);
  }
  await client.destroy(source);

  const overhead = (name: string, service: number[], bare: number[], baseline: string, goal: string) => {
    figures.push({ name: `${name}: service`, unit: 'ms', median: median(service), samples: service });
    figures.push({ name: `${name}: ${baseline}`, unit: 'ms', median: median(bare), samples: bare });
    figures.push({
      name: `${name}: service overhead`,
      unit: 'ms',
      median: median(service) - median(bare),
      samples: service.map((s, i) => s - (bare[i] ?? median(bare))),
      goal,
    });
  };
  overhead('cold start → first byte', cold, bareCold, 'bare create+exec', '≤ 150 ms');
  overhead('warm start → first byte', warm, bareWarm, 'bare create+restore+exec', '≤ 50 ms');
  overhead('follow-up → first byte', followUp, bareExec, 'bare exec', '≤ 30 ms');
  // A turn runs detachable (it must survive its owner: reattach), which the backend starts under
  // a shim process: the share of the follow-up overhead that is the backend's, not the service's.
  figures.push({
    name: 'follow-up → first byte: bare detachable exec',
    unit: 'ms',
    median: median(bareDetachable),
    samples: bareDetachable,
  });
} finally {
  await harness.close();
  await scratch.remove();
}
writeReport({ benchmark: 'conversations', runs }, figures, { json: values.json });
