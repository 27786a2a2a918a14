// Login timing: unknown user vs wrong password must be indistinguishable. Starts a
// throw-away embedded PostgreSQL, builds the real app, and measures N alternating attempts
// of each kind through app.inject, printing the median and p90 of each and their gap.
//   /work/main/node_modules/.bin/node scripts/bench-login.ts [iterations=200]
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';

const iterations = Number(process.argv[2] ?? 200);
const scratch = await startScratchPostgres({ database: 'bench' });
try {
  const { app, close } = await appOnDatabase(scratch.pg.url, {
    RATE_LIMIT_MAX: '1000000',
    AUTH_RATE_LIMIT_MAX: '1000000',
  });
  const reg = await app.inject({
    method: 'POST',
    url: '/api/auth/register',
    payload: { email: 'bench@example.com', password: 'the right passphrase' },
  });
  if (reg.statusCode !== 201) throw new Error(`register failed: ${reg.body}`);

  const attempt = async (email: string) => {
    const t0 = process.hrtime.bigint();
    const res = await app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email, password: 'a wrong passphrase' },
    });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    return { ms, status: res.statusCode, body: res.body };
  };
  // Warm-up (JIT, dummy hash, connection pool).
  for (let i = 0; i < 10; i++) {
    await attempt('nobody@example.com');
    await attempt('bench@example.com');
  }
  const unknown: number[] = [];
  const wrong: number[] = [];
  const bodies = new Set<string>();
  for (let i = 0; i < iterations; i++) {
    // Alternate the order so drift affects both series equally.
    const pair =
      i % 2 === 0 ? ['nobody@example.com', 'bench@example.com'] : ['bench@example.com', 'nobody@example.com'];
    for (const email of pair) {
      const r = await attempt(email);
      bodies.add(`${r.status} ${r.body}`);
      (email === 'nobody@example.com' ? unknown : wrong).push(r.ms);
    }
  }
  const q = (xs: number[], p: number) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  };
  const mu = q(unknown, 0.5);
  const mw = q(wrong, 0.5);
  const gap = (Math.abs(mu - mw) / Math.min(mu, mw)) * 100;
  console.log(`login timing, ${iterations} attempts each (argon2id m=19456 KiB, t=2, p=1)`);
  console.log(`  unknown user:   median ${mu.toFixed(2)} ms  p90 ${q(unknown, 0.9).toFixed(2)} ms`);
  console.log(`  wrong password: median ${mw.toFixed(2)} ms  p90 ${q(wrong, 0.9).toFixed(2)} ms`);
  console.log(`  median gap: ${gap.toFixed(1)}% (limit 10%)  distinct responses: ${bodies.size}`);
  await close();
  process.exitCode = gap <= 10 && bodies.size === 1 ? 0 : 1;
} finally {
  await scratch.remove();
}
