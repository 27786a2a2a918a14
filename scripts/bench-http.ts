// HTTP benchmark: an authenticated GET of one resource through the real app, against
// baselines measured in the same run on the same database:
//   hello     — bare Fastify returning a constant JSON body (the framework ceiling)
//   baseline  — bare Fastify doing what an authenticated read must do at minimum: one
//               API-key lookup by SHA-256 and one primary-key SELECT
//   paddock   — GET /api/environments/:id with a bearer key (auth, tenant scoping, schema)
//   paddock_traced — the same with trace export on (OTEL_EXPORTER_OTLP_ENDPOINT at a loopback
//               OTLP receiver in another process): the request span and its query spans,
//               exported in batches. Tracing is per process: it is started for this run of
//               each round only, with an app built for it, and stopped again.
//               BENCH_TRACE_RATIO=0.1: keep one trace in ten (parentbased_traceidratio).
// Load comes from autocannon in a separate process (50 connections). Goal
// (docs/performance.md): paddock ≥ 70% of baseline, p99 ≤ 20 ms.
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import Fastify from 'fastify';
import { hashApiKey } from '../apps/server/src/auth/api-key.ts';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { startTracing } from '../apps/server/src/observability/tracing.ts';
import { VERSION } from '../apps/server/src/version.ts';
import { createVerifiedUser } from '../apps/server/test/helpers/factories.ts';
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';

const ROOT = resolve(import.meta.dirname, '..');
const DURATION_S = Number(process.env['BENCH_DURATION_S'] ?? 5);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const CONNECTIONS = 50;
const TRACE_RATIO = Number(process.env['BENCH_TRACE_RATIO'] ?? 1);

interface Run {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function load(url: string, headers: Record<string, string>, seconds = DURATION_S): Promise<Run> {
  const args = [
    join(ROOT, 'node_modules/autocannon/autocannon.js'),
    '-j',
    '-c',
    String(CONNECTIONS),
    '-d',
    String(seconds),
    ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}=${v}`]),
    url,
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  await new Promise((r) => child.on('exit', r));
  const j = JSON.parse(out) as {
    requests: { average: number };
    latency: { p50: number; p99: number };
    errors: number;
    non2xx: number;
  };
  return {
    rps: j.requests.average,
    p50: j.latency.p50,
    p99: j.latency.p99,
    errors: j.errors,
    non2xx: j.non2xx,
  };
}

/** A loopback OTLP receiver in a process of its own (it drains and answers `{}`): a collector's stand-in. */
async function startReceiver(): Promise<{ url: string; stop(): void }> {
  const code = `const s=require('node:http').createServer((q,r)=>{q.resume();q.on('end',()=>{r.writeHead(200,{'content-type':'application/json'});r.end('{}')})});s.listen(0,'127.0.0.1',()=>console.log(s.address().port))`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
  const port = await new Promise<string>((resolve) =>
    child.stdout.once('data', (d) => resolve(String(d).trim())),
  );
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
};

export async function benchHttp(): Promise<Record<string, unknown>> {
  const scratch = await startScratchPostgres({ database: 'bench' });
  const pg = scratch.pg;
  try {
    const { app, database, close } = await appOnDatabase(pg.url, { RATE_LIMIT_MAX: '100000000' });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const appUrl = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

    const user = await createVerifiedUser(database.db);
    const created = await fetch(`${appUrl}/api/environments`, {
      method: 'POST',
      headers: { ...user.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench-env', env_vars: { A: '1' } }),
    });
    if (created.status !== 201) throw new Error(`creating the bench environment failed: ${created.status}`);
    const envId = ((await created.json()) as { id: string }).id;

    // Baselines share the database and a pool of the same size.
    const basePool = openDatabase({ connectionString: pg.url, max: 10 }).pool;
    const bare = Fastify();
    bare.get('/hello', async () => ({ hello: 'world' }));
    bare.get<{ Params: { id: string } }>('/baseline/:id', async (request, reply) => {
      const key = (request.headers.authorization ?? '').slice(7);
      const k = await basePool.query({
        name: 'key',
        text: 'SELECT user_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL',
        values: [hashApiKey(key)],
      });
      if (k.rowCount === 0) return reply.code(401).send({ error: 'unauthorized' });
      const r = await basePool.query({
        name: 'env',
        text: 'SELECT * FROM environments WHERE id = $1 AND tenant_id = $2',
        values: [request.params.id, k.rows[0].user_id],
      });
      return r.rows[0];
    });
    await bare.listen({ port: 0, host: '127.0.0.1' });
    const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}`;

    const runs: Record<'hello' | 'baseline' | 'paddock' | 'paddock_traced', Run[]> = {
      hello: [],
      baseline: [],
      paddock: [],
      paddock_traced: [],
    };
    // Trace export on: a second app built after tracing started (as startServer does), measured in
    // each round right after the untraced one; tracing stops again before the next round.
    const receiver = await startReceiver();
    const tracedRun = async (): Promise<Run> => {
      const tracing = await startTracing({
        endpoint: receiver.url,
        version: VERSION,
        sampler: { parentBased: true, ratio: TRACE_RATIO },
      });
      try {
        const traced = await appOnDatabase(pg.url, { RATE_LIMIT_MAX: '100000000' });
        try {
          await traced.app.listen({ port: 0, host: '127.0.0.1' });
          const tracedUrl = `http://127.0.0.1:${(traced.app.server.address() as { port: number }).port}`;
          // Warmed up first, as the untraced app is by the rounds before (its pool, its JIT).
          await load(`${tracedUrl}/api/environments/${envId}`, user.auth, 2);
          return await load(`${tracedUrl}/api/environments/${envId}`, user.auth);
        } finally {
          await traced.close();
        }
      } finally {
        await tracing.stop();
      }
    };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        runs.hello.push(await load(`${bareUrl}/hello`, {}));
        runs.baseline.push(await load(`${bareUrl}/baseline/${envId}`, user.auth));
        runs.paddock.push(await load(`${appUrl}/api/environments/${envId}`, user.auth));
        runs.paddock_traced.push(await tracedRun());
      }
    } finally {
      receiver.stop();
    }
    await close();
    await bare.close();
    await basePool.end();

    const summary = Object.fromEntries(
      Object.entries(runs).map(([name, rs]) => [
        name,
        {
          rps: Math.round(median(rs.map((r) => r.rps))),
          p50_ms: median(rs.map((r) => r.p50)),
          p99_ms: median(rs.map((r) => r.p99)),
          errors: rs.reduce((a, r) => a + r.errors + r.non2xx, 0),
        },
      ]),
    ) as Record<string, { rps: number; p50_ms: number; p99_ms: number; errors: number }>;
    const ratio = summary['paddock']!.rps / summary['baseline']!.rps;
    const tracedRatio = summary['paddock_traced']!.rps / summary['paddock']!.rps;
    return {
      connections: CONNECTIONS,
      duration_s: DURATION_S,
      rounds: ROUNDS,
      ...summary,
      paddock_vs_baseline: Number(ratio.toFixed(3)),
      trace_ratio: TRACE_RATIO,
      traced_vs_paddock: Number(tracedRatio.toFixed(3)),
      goal: 'paddock >= 0.70 x baseline, p99 <= 20 ms',
      goal_met: ratio >= 0.7 && summary['paddock']!.p99_ms <= 20,
    };
  } finally {
    await scratch.remove();
  }
}

if (import.meta.main) {
  const result = await benchHttp();
  console.log(JSON.stringify(result, null, 2));
}
