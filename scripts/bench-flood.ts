// Flood bodies (issue 14, finding 1): how long one oversized request holds the event loop,
// and how large its error answer is. Starts a throw-away embedded PostgreSQL, builds the
// real app and sends each body through a real socket from another process (curl) while a timer measures the longest
// event-loop stall (monitorEventLoopDelay) and the busy time (eventLoopUtilization).
//   node scripts/bench-flood.ts [runs=3]
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createVerifiedUser } from '../apps/server/test/helpers/factories.ts';
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';

const map = (n: number, value: (i: number) => unknown) => {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) out[`K${i}`] = value(i);
  return out;
};

const CASES: Array<{ name: string; url: string; body: () => unknown }> = [
  {
    name: 'env_vars: 300,000 numeric values',
    url: '/api/environments',
    body: () => ({ name: 'flood', env_vars: map(300_000, (i) => i) }),
  },
  {
    name: 'env_vars: 600,000 keys',
    url: '/api/environments',
    body: () => ({ name: 'flood', env_vars: map(600_000, () => 'v') }),
  },
  {
    name: 'metadata: 300,000 keys',
    url: '/api/vaults',
    body: () => ({ name: 'flood', metadata: map(300_000, () => 1) }),
  },
  {
    name: 'apply: 300,000-entry env_vars in a spec',
    url: '/api/apply',
    body: () => ({
      resources: [{ kind: 'Environment', name: 'flood', spec: { env_vars: map(300_000, (i) => i) } }],
    }),
  },
];

const RUNS = Number(process.argv[2] ?? 3);
const scratch = await startScratchPostgres({ database: 'bench' });
const dir = mkdtempSync(join(tmpdir(), 'paddock-bench-flood-'));
try {
  const { app, deps, close } = await appOnDatabase(scratch.pg.url, { RATE_LIMIT_MAX: '1000000' });
  const user = await createVerifiedUser(deps.db);
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  const post = (url: string, file: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      execFile(
        'curl',
        [
          '-sS',
          '-X',
          'POST',
          '-H',
          `authorization: ${user.auth.authorization}`,
          '-H',
          'content-type: application/json',
          '-H',
          'expect:',
          '--data-binary',
          `@${file}`,
          '-w',
          '\n%{http_code}',
          `${address}${url}`,
        ],
        { maxBuffer: 1 << 30 },
        (err, stdout) => {
          // curl reports a failed upload after an early answer (413 closes the connection).
          if (err && !/\n\d{3}$/.test(stdout)) return reject(err);
          const cut = stdout.lastIndexOf('\n');
          resolve({ status: Number(stdout.slice(cut + 1)), text: stdout.slice(0, cut) });
        },
      );
    });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`median of ${RUNS} runs after one warm-up run`);
  console.log('case | status | response ms | longest event-loop stall ms | loop busy ms | body bytes');
  for (const c of CASES) {
    const payload = JSON.stringify(c.body());
    const file = join(dir, 'body.json');
    writeFileSync(file, payload);
    const runs: Array<{ status: number; ms: number; stall: number; busy: number; bytes: number }> = [];
    for (let r = 0; r <= RUNS; r++) {
      const histogram = monitorEventLoopDelay({ resolution: 5 });
      histogram.enable();
      const elu0 = performance.eventLoopUtilization();
      const t0 = performance.now();
      // The client is another process (curl), so only the server's work lands on this loop.
      const { status, text } = await post(c.url, file);
      const ms = performance.now() - t0;
      const elu = performance.eventLoopUtilization(elu0);
      histogram.disable();
      if (r > 0)
        runs.push({
          status,
          ms,
          stall: histogram.max / 1e6,
          busy: elu.active,
          bytes: Buffer.byteLength(text),
        });
    }
    console.log(
      `${c.name} (${(payload.length / 1e6).toFixed(1)} MB) | ${runs[0]!.status} | ${median(runs.map((r) => r.ms)).toFixed(0)} | ${median(runs.map((r) => r.stall)).toFixed(0)} | ${median(runs.map((r) => r.busy)).toFixed(0)} | ${runs[0]!.bytes}`,
    );
  }
  await close();
} finally {
  rmSync(dir, { recursive: true, force: true });
  await scratch.remove();
}
