// Conversation benchmark: the service's share of "prompt → first output byte on SSE".
//
// With the scripted runtime (the prompt is the turn's shell script) against a real sandboxd and
// PostgreSQL, it measures, as medians of several runs:
//   cold       POST /api/conversations → first stdout event on the SSE stream
//   warm       the same on an environment with a checkpoint (stage checkpoint_restore)
//   follow-up  POST /api/conversations/:id/prompts → first stdout event of that turn, on the stream
//              the client has followed since it started the conversation (as the console and
//              `paddock run -f` do); also reported: a follow-up sent as soon as the previous
//              turn's end shows (the backend still refills what that turn used)
// and, in each run right before the service's figure it is the baseline of, the bare backend
// doing the same work through packages/sandbox-client:
//   bare create+exec        create a sandbox, exec the same program, first stdout byte
//   bare create+restore+exec the same with a checkpoint restore before the exec
//   bare exec               exec in an existing sandbox, first stdout byte
//   bare detachable exec    the same, detachable as a turn is (reported, not subtracted)
// The service overhead is the difference of the medians (goals, design/performance.md:
// ≤ 150 ms cold, ≤ 50 ms warm, ≤ 30 ms follow-up).
//
// Each measured start, the goal's follow-up and the bare exec come after a pause of QUIET_MS, so
// that no run times the background work of the one before it.
//
//   node scripts/bench-conversations.ts [--runs 7] [--json out.json]
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { SESSION_SAVE_DELAY_MS } from '../apps/server/src/conversations/engine/conversation-server.ts';
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
/**
 * Before each measured start, service and bare alike: the previous run's sandbox destroy and the
 * backend's refills (session shims, write standbys) run on after their calls answered, and a start
 * measured beside them timed the contention (cold overhead 132–226 ms on one day, 68–78 ms with
 * this pause; docs/performance.md, twelfth pass).
 */
const QUIET_MS = 700;
// A follow-up after the pause must not find the previous turn's session save running.
if (QUIET_MS >= SESSION_SAVE_DELAY_MS) throw new Error('QUIET_MS must be shorter than SESSION_SAVE_DELAY_MS');
const quiet = () => new Promise((r) => setTimeout(r, QUIET_MS));

/**
 * Follows a conversation's stdout on one SSE stream and notes when the first stdout event of each
 * turn arrived. `firstOf(turnId)` resolves with that time (at once when it came already).
 */
function follow(url: string, user: TestUser, id: string) {
  const controller = new AbortController();
  const seen = new Map<string, number>();
  const waiting = new Map<string | null, (at: number) => void>();
  const reading = (async () => {
    const res = await fetch(`${url}/api/conversations/${id}/stream?streams=stdout`, {
      headers: { ...user.auth, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    if (res.status !== 200 || !res.body) throw new Error(`stream answered ${res.status}`);
    const decoder = new TextDecoder();
    let text = '';
    for await (const chunk of res.body) {
      const at = performance.now();
      text += decoder.decode(chunk as Uint8Array, { stream: true });
      let end = text.indexOf('\n\n');
      while (end !== -1) {
        const frame = text.slice(0, end);
        text = text.slice(end + 2);
        end = text.indexOf('\n\n');
        const data = /(?:^|\n)event: stdout\ndata: (.*)/.exec(frame)?.[1];
        if (!data) continue;
        const turnId = (JSON.parse(data) as { turn_id: string | null }).turn_id;
        if (turnId && !seen.has(turnId)) {
          if (seen.size === 0) waiting.get(null)?.(at);
          seen.set(turnId, at);
          waiting.get(turnId)?.(at);
        }
      }
    }
  })().catch((err: unknown) => {
    if (!controller.signal.aborted) throw err;
  });
  return {
    /** null: the first stdout event of the conversation (its first turn's). */
    firstOf(turnId: string | null): Promise<number> {
      const at = turnId === null ? [...seen.values()][0] : seen.get(turnId);
      if (at !== undefined) return Promise.resolve(at);
      return Promise.race([
        new Promise<number>((resolve) => waiting.set(turnId, resolve)),
        reading.then(() => {
          throw new Error('the stream ended before the turn printed anything');
        }),
      ]);
    },
    close() {
      controller.abort();
    },
  };
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

  /** Starts a conversation and follows its stream from then on (kept open for the follow-up). */
  const startToFirstByte = async (agentId: string) => {
    const started = performance.now();
    const res = await harness.api(user, 'POST', '/api/conversations', { agent_id: agentId, prompt: PROGRAM });
    if (res.status !== 201) throw new Error(`start answered ${res.status}: ${JSON.stringify(res.body)}`);
    const id = (res.body as { id: string }).id;
    // The first stdout event of a new conversation is its first turn's: no other request is made
    // while the start is timed (a client following a run needs none).
    const stream = follow(harness.url, user, id);
    const at = await stream.firstOf(null);
    return { ms: at - started, id, stream };
  };
  const settle = async (id: string) => {
    await harness.waitFor(user, id, (c) => c.status === 'idle' || c.status === 'failed', 60_000);
  };

  // Warm-up of both paths (first-use costs are not what is measured).
  for (const agentId of [agent, warmAgent]) {
    const { id, stream } = await startToFirstByte(agentId);
    stream.close();
    await settle(id);
    await harness.api(user, 'DELETE', `/api/conversations/${id}`);
  }

  // The bare backend, same program: measured in the same run as the service's figure it is the
  // baseline of, right before it, so that the host's drift over a whole command (it is large on a
  // shared machine) does not fall between a figure and its baseline.
  const source = `bench-src-${randomBytes(4).toString('hex')}`;
  await client.create(source);
  const checkpoint = await client.createCheckpoint(source);
  const bareName = () => `bench-${randomBytes(4).toString('hex')}`;
  {
    // Warm-up of the bare paths too.
    const name = bareName();
    await client.create(name);
    await bareFirstByte(client, name);
    await bareFirstByte(client, name, true);
    await client.destroy(name);
  }

  const cold: number[] = [];
  const warm: number[] = [];
  const followUp: number[] = [];
  const followUpAtOnce: number[] = [];
  const bareCold: number[] = [];
  const bareWarm: number[] = [];
  const bareExec: number[] = [];
  const bareDetachable: number[] = [];
  for (let run = 0; run < runs; run++) {
    const name = bareName();
    await quiet();
    let started = performance.now();
    await client.create(name);
    bareCold.push(performance.now() - started + (await bareFirstByte(client, name)));
    await quiet(); // the baseline of a follow-up: an exec in a sandbox done starting
    bareExec.push(await bareFirstByte(client, name));
    bareDetachable.push(await bareFirstByte(client, name, true));
    await client.destroy(name);

    await quiet();
    const c = await startToFirstByte(agent);
    cold.push(c.ms);
    await settle(c.id);
    // Follow-ups on the warm sandbox of the cold conversation, on the stream followed since the
    // start: one as soon as the turn's end shows (reported), one after the pause (the goal's
    // figure; the pause is shorter than the session save's delay, so no save is in its way).
    const prompt = async () => {
      const started = performance.now();
      const prompted = await harness.api(user, 'POST', `/api/conversations/${c.id}/prompts`, {
        prompt: PROGRAM,
      });
      if (prompted.status !== 202) throw new Error(`prompt answered ${prompted.status}`);
      const at = await c.stream.firstOf((prompted.body as { turn: { id: string } }).turn.id);
      await settle(c.id);
      return at - started;
    };
    followUpAtOnce.push(await prompt());
    await quiet();
    followUp.push(await prompt());
    c.stream.close();
    await settle(c.id);
    await harness.api(user, 'DELETE', `/api/conversations/${c.id}`);

    const restored = bareName();
    await quiet();
    started = performance.now();
    await client.create(restored);
    await client.restoreCheckpoint(restored, checkpoint.id);
    bareWarm.push(performance.now() - started + (await bareFirstByte(client, restored)));
    await client.destroy(restored);

    await quiet();
    const w = await startToFirstByte(warmAgent);
    warm.push(w.ms);
    w.stream.close();
    await settle(w.id);
    await harness.api(user, 'DELETE', `/api/conversations/${w.id}`);
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
  figures.push({
    name: 'follow-up at once (as soon as the previous turn ended) → first byte: service',
    unit: 'ms',
    median: median(followUpAtOnce),
    samples: followUpAtOnce,
  });
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
