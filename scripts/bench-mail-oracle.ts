// Account-existence timing of the mail-sending endpoints: POST /api/auth/password-reset and
// /api/auth/resend-verification must take the same time for a registered and an unknown
// address (issue 14, finding 3). Starts a throw-away embedded PostgreSQL, builds the real
// app with mail delivery configured (no job runner: the request's own work is measured),
// and times N alternating requests of each kind through app.inject, printing the medians
// and their gap.
//   node scripts/bench-mail-oracle.ts [iterations=200]
import { migrateJobs } from '../apps/server/src/jobs/worker.ts';
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';

const iterations = Number(process.argv[2] ?? 200);
const LIMIT_PERCENT = 10;
const scratch = await startScratchPostgres({ database: 'bench' });
let ok = true;
try {
  const { app, deps, database, close } = await appOnDatabase(scratch.pg.url, {
    RATE_LIMIT_MAX: '1000000',
    AUTH_RATE_LIMIT_MAX: '1000000',
    EMAIL_DELIVERY: '',
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: '2',
  });
  await migrateJobs(database.pool, deps.logger);
  const known = 'bench@example.com';
  const unknown = 'nobody@example.com';
  const reg = await app.inject({
    method: 'POST',
    url: '/api/auth/register',
    payload: { email: known, password: 'the right passphrase' },
  });
  if (reg.statusCode !== 201) throw new Error(`register failed: ${reg.body}`);

  const q = (xs: number[], p: number) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  };

  for (const url of ['/api/auth/password-reset', '/api/auth/resend-verification']) {
    const attempt = async (email: string) => {
      const t0 = process.hrtime.bigint();
      const res = await app.inject({ method: 'POST', url, payload: { email } });
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      return { ms, status: res.statusCode, body: res.body };
    };
    for (let i = 0; i < 10; i++) {
      await attempt(unknown);
      await attempt(known);
    }
    const times: Record<string, number[]> = { [known]: [], [unknown]: [] };
    const bodies = new Set<string>();
    for (let i = 0; i < iterations; i++) {
      // Alternate the order so drift affects both series equally.
      for (const email of i % 2 === 0 ? [unknown, known] : [known, unknown]) {
        const r = await attempt(email);
        bodies.add(`${r.status} ${r.body}`);
        times[email]!.push(r.ms);
      }
    }
    const mk = q(times[known]!, 0.5);
    const mu = q(times[unknown]!, 0.5);
    const gap = (Math.abs(mk - mu) / Math.min(mk, mu)) * 100;
    console.log(`${url}, ${iterations} requests each`);
    console.log(`  registered: median ${mk.toFixed(2)} ms  p90 ${q(times[known]!, 0.9).toFixed(2)} ms`);
    console.log(`  unknown:    median ${mu.toFixed(2)} ms  p90 ${q(times[unknown]!, 0.9).toFixed(2)} ms`);
    console.log(
      `  median gap: ${gap.toFixed(1)}% (limit ${LIMIT_PERCENT}%)  distinct responses: ${bodies.size}`,
    );
    if (gap > LIMIT_PERCENT || bodies.size !== 1) ok = false;
  }
  await close();
  process.exitCode = ok ? 0 : 1;
} finally {
  await scratch.remove();
}
