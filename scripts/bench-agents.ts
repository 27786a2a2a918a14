// Agent benchmark: per runtime, prompt → first assistant text on the SSE stream, with the fake
// inference provider answering at once, and the service's own share of it.
//
// Against a real sandboxd (with the runtime layer: the CLIs in every sandbox), PostgreSQL and the
// fake provider (apps/server/test/helpers/fake-inference.ts), for each runtime, as medians:
//   service   POST /api/conversations/:id/prompts on a warm conversation (the turn resumes the
//             session) → the first stdout event on SSE that carries the answer's text
//   CLI alone the same turn's command (the adapter's argv, env and files) exec'd straight in the
//             same sandbox through packages/sandbox-client, against the same fake → the first
//             stdout chunk carrying the answer's text
// The service's share is the difference of the medians; the rest is the CLI's own start-up.
// A runtime whose CLI is not in the sandbox is reported as skipped; when no runtime was measured
// the benchmark exits 1. The shared runtime layer (the agent CLIs, as `npm test` uses them) is
// prepared first, with progress on stderr: on a fresh machine that is the long part, and left to
// the benchmark's sandboxd it would die with it, half installed.
//
//   node scripts/bench-agents.ts [--runs 5] [--json out.json] [--runtimes claude,gemini]
import { parseArgs } from 'node:util';
import { prepareSharedLayer, sharedLayerDir } from '../apps/sandboxd/test/runtime-layer-cache.ts';
import type { Runtime } from '../apps/server/src/agents/agents.tables.ts';
import { defaultRuntimes } from '../apps/server/src/conversations/turns/runtimes/registry.ts';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { migrate } from '../apps/server/src/db/migrate.ts';
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { createLogger } from '../apps/server/src/observability/logger.ts';
import { startAgentsHarness } from '../apps/server/test/helpers/agents-e2e.ts';
import type { TestUser } from '../apps/server/test/helpers/factories.ts';
import { PROVIDER_ENV } from '../apps/server/test/helpers/fake-inference.ts';
import { startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { createSandboxClient } from '../packages/sandbox-client/src/index.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    json: { type: 'string' },
    runtimes: { type: 'string', default: 'claude,codex,gemini,opencode' },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 3) throw new Error('--runs must be an integer ≥ 3');
const runtimes = values.runtimes.split(',') as Runtime[];
const ANSWER = 'bench answer';

/** Resolves when a stdout event after `after` carries `text`. */
async function firstText(
  url: string,
  user: TestUser,
  id: string,
  text: string,
  after?: string,
): Promise<number> {
  const controller = new AbortController();
  const res = await fetch(`${url}/api/conversations/${id}/stream?streams=stdout,stage`, {
    headers: { ...user.auth, accept: 'text/event-stream', ...(after ? { 'last-event-id': after } : {}) },
    signal: controller.signal,
  });
  if (res.status !== 200 || !res.body) throw new Error(`stream answered ${res.status}`);
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = block.split('\n').find((l) => l.startsWith('data: '));
        if (!data) continue;
        const event = JSON.parse(data.slice(6)) as {
          stream: string;
          text?: string;
          stage?: string;
          state?: string;
        };
        if (event.stream === 'stdout' && event.text?.includes(text)) return performance.now();
        if (event.stage === 'turn' && event.state && event.state !== 'started')
          throw new Error(`the turn ended (${event.state}) before the answer`);
      }
    }
  } finally {
    controller.abort();
  }
  throw new Error('the stream ended before the answer');
}

async function lastEventId(url: string, user: TestUser, id: string): Promise<string | undefined> {
  let after: string | undefined;
  for (;;) {
    const res = await fetch(
      `${url}/api/conversations/${id}/events?limit=500${after ? `&after=${after}` : ''}`,
      {
        headers: user.auth,
      },
    );
    const page = (await res.json()) as { data: { id: string }[]; meta: { has_more: boolean } };
    const last = page.data.at(-1);
    if (last) after = last.id;
    if (!page.meta.has_more) return after;
  }
}

console.error(`bench agents: preparing the runtime layer (the agent CLIs) in ${sharedLayerDir()}`);
const layer = await prepareSharedLayer();
console.error(`bench agents: runtime layer ready in ${layer.seconds} s`);

const scratch = await startScratchPostgres({ database: 'paddock_template' });
const template = openDatabase({ connectionString: scratch.pg.url, max: 2 });
await migrate(template.db, template.pool);
await migrateJobs(template.pool, createLogger({ level: 'warn' }));
await template.close();
process.env['PADDOCK_TEST_PG_ADMIN_URL'] = scratch.pg.adminUrl;
process.env['PADDOCK_TEST_PG_TEMPLATE'] = 'paddock_template';

// The database goes away even when the harness cannot start (a loaded machine's sandboxd).
const a = await startAgentsHarness({ env: { LOG_LEVEL: 'warn' } }).catch(async (err: unknown) => {
  await scratch.remove();
  throw err;
});
const client = createSandboxClient({ baseUrl: a.h.sandboxd.url, token: a.h.sandboxd.token });
const figures: Figure[] = [];
const skipped: string[] = [];
try {
  const user = await a.h.user();
  const measure = async (runtime: Runtime): Promise<void> => {
    const setup = await a.setup(user, { runtime });
    const provider = PROVIDER_ENV[runtime];
    let n = 0;
    const marker = () => `BENCH-${runtime}-${n++}`;
    // The first turn provisions the sandbox and starts the session (not measured).
    const first = marker();
    a.fake.script(runtime, { marker: first, reply: ANSWER });
    const conv = await a.h.start(user, { agent_id: setup.agentId, vault_id: setup.vaultId, prompt: first });
    const warmup = await a.followTurn(user, conv.id);
    if (warmup.end.state !== 'done') {
      skipped.push(`${runtime} (first turn ${warmup.end.state}: ${warmup.end.message ?? ''})`);
      return;
    }
    const service: number[] = [];
    const alone: number[] = [];
    for (let run = 0; run < runs; run++) {
      const m = marker();
      a.fake.script(runtime, { marker: m, reply: ANSWER });
      const after = await lastEventId(a.h.url, user, conv.id);
      const started = performance.now();
      const seen = firstText(a.h.url, user, conv.id, ANSWER, after);
      const res = await a.h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: m });
      if (res.status !== 202) throw new Error(`prompt answered ${res.status}: ${JSON.stringify(res.body)}`);
      service.push((await seen) - started);
      await a.h.waitForTurn(user, conv.id, run + 2, 120_000);
    }
    // The CLI alone: the adapter's command for the same session, exec'd straight in the same sandbox.
    const current = await a.h.get(user, conv.id);
    const sandboxName = current.sandbox?.name ?? '';
    const sessionId = (await a.h.turns(user, conv.id)).at(-1)?.runtime_session_id ?? null;
    const agent = (await a.h.api(user, 'GET', `/api/agents/${setup.agentId}`)).body as { model: string };
    // What the provisioned env holds for the provider (the adapters read base URLs from it).
    const providerEnv: Record<string, string> = {
      [provider.key]: setup.key,
      [provider.baseUrl]: `${a.fake.sandboxUrl}${provider.path}`,
      ...provider.testEnv,
    };
    for (let run = 0; run < runs; run++) {
      const m = marker();
      a.fake.script(runtime, { marker: m, reply: ANSWER });
      const cmd = defaultRuntimes(runtime).buildTurn({
        agent: {
          id: setup.agentId,
          name: 'bench',
          runtime,
          model: agent.model,
          system: null,
          skills: [],
          mcpServers: {},
          environmentId: setup.environmentId,
        },
        prompt: m,
        images: [],
        resumeSessionId: sessionId,
        mcpServers: {},
        turnId: `bench-${run}`,
        env: providerEnv,
      });
      const started = performance.now();
      for (const file of cmd.files)
        await client.writeFile(sandboxName, file.path, file.content, {
          mode: file.mode ?? 0o600,
          mkdirParents: true,
        });
      let at = 0;
      let out = '';
      const handle = await client.execStream(sandboxName, {
        cmd: cmd.argv,
        dir: cmd.cwd,
        env: { ...providerEnv, ...cmd.env },
        timeoutMs: 120_000,
        onStdout: (chunk) => {
          out += chunk.toString('utf8');
          if (!at && out.includes(ANSWER)) at = performance.now();
        },
      });
      await handle.exited;
      if (!at) throw new Error(`${runtime} alone printed no answer: ${out.slice(-500)}`);
      alone.push(at - started);
    }
    figures.push({
      name: `${runtime}: prompt → first text (service)`,
      unit: 'ms',
      median: median(service),
      samples: service,
    });
    figures.push({ name: `${runtime}: the CLI alone`, unit: 'ms', median: median(alone), samples: alone });
    figures.push({
      name: `${runtime}: service share`,
      unit: 'ms',
      median: median(service) - median(alone),
      samples: service.map((s, i) => s - (alone[i] ?? median(alone))),
    });
    await a.h.api(user, 'DELETE', `/api/conversations/${conv.id}`);
  };
  for (const runtime of runtimes) {
    // One runtime failing (its CLI missing, a turn failing) is reported and the others still run.
    await measure(runtime).catch((err: unknown) => {
      skipped.push(`${runtime} (${err instanceof Error ? err.message.slice(0, 300) : String(err)})`);
    });
  }
} finally {
  await a.close();
  await scratch.remove();
}
if (skipped.length > 0) console.error(`skipped: ${skipped.join('; ')}`);
writeReport({ benchmark: 'agents', runs }, figures, { json: values.json });
if (figures.length === 0) {
  console.error('bench agents: nothing was measured (every runtime was skipped)');
  process.exitCode = 1;
}
