// Data export of an account: how long the background build takes, how big the gzipped
// download is, and the peak RSS of the server process while it builds, at several account
// sizes (default 10,000, 100,000 and 1,000,000 log events). The build streams in a writer
// thread with its own heap limits (account-exports.build.ts WRITER_LIMITS): what it holds is one
// page of rows and one chunk, so the peak is bounded by those limits (V8 lets garbage accumulate
// up to them before collecting), not by the account. Small builds end before the thread's heap
// has grown to that bound; past it the peak stays where it is. The report gives each peak's ratio
// to the previous.
//   npm run bench -- export [--sizes 10000,100000,1000000]
// Each size gets a fresh server process (the real paddock-server entry, own Node flags) on one
// throw-away PostgreSQL; the peak is the process's VmHWM, reset when the export is asked for.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createGunzip } from 'node:zlib';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { generateApiKey } from '../apps/server/src/auth/api-key.ts';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { freePort } from '../apps/server/src/db/embedded.ts';
import { SERVER_NODE_FLAGS } from '../apps/server/src/node-flags.ts';
import { startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';

const ROOT = resolve(import.meta.dirname, '..');
const argIndex = process.argv.indexOf('--sizes');
const SIZES = (argIndex > 0 ? (process.argv[argIndex + 1] ?? '') : '10000,100000,1000000')
  .split(',')
  .map(Number)
  .filter((n) => Number.isInteger(n) && n > 0);
const CONVERSATIONS = 10;

const kib = (pid: number, field: 'VmRSS' | 'VmHWM'): number => {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0);
};
const mib = (k: number) => `${(k / 1024).toFixed(1)} MiB`;

const scratch = await startScratchPostgres({ database: 'bench' });
const database = openDatabase({ connectionString: scratch.pg.url, max: 4, connectionTimeoutMillis: 3000 });
const results: Array<{
  events: number;
  seconds: number;
  bytes: number;
  raw: number;
  idle: number;
  peak: number;
}> = [];
try {
  for (const events of SIZES) {
    const port = await freePort();
    const server = spawn(
      process.execPath,
      [...SERVER_NODE_FLAGS, join(ROOT, 'apps/server/src/main.ts'), 'serve'],
      {
        cwd: ROOT,
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          PATH: process.env['PATH'],
          TMPDIR: process.env['TMPDIR'],
          NODE_ENV: 'test',
          LOG_LEVEL: 'warn',
          PORT: String(port),
          DATABASE_URL: scratch.pg.url,
          DATABASE_SSL: 'false',
          MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
          EMAIL_DELIVERY: 'none',
          RATE_LIMIT_MAX: '1000000',
        },
      },
    );
    const pid = server.pid ?? 0;
    const base = `http://127.0.0.1:${port}`;
    try {
      for (let i = 0; ; i++) {
        const ok = await fetch(`${base}/health/ready`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        if (i > 600 || server.exitCode !== null) throw new Error('the server did not start');
        await new Promise((r) => setTimeout(r, 100));
      }

      // The account: a user with a key, CONVERSATIONS conversations sharing `events` log rows of
      // agent-like output (a line of text and a varying hash, ~180 bytes each).
      const tenant = uuidv7();
      const { key, prefix, hash } = generateApiKey();
      await database.db
        .insertInto('users')
        .values({
          id: tenant,
          email: `bench-${events}@example.com`,
          password_hash: null,
          email_verified_at: new Date(),
        })
        .execute();
      await database.db
        .insertInto('api_keys')
        .values({ id: uuidv7(), user_id: tenant, name: 'bench', prefix, key_hash: hash })
        .execute();
      for (let c = 0; c < CONVERSATIONS; c++) {
        const conversation = uuidv7();
        await database.db
          .insertInto('conversations')
          .values({ id: conversation, tenant_id: tenant, status: 'idle', source: 'api', title: `bench ${c}` })
          .execute();
        const turn = uuidv7();
        await database.db
          .insertInto('turns')
          .values({
            id: turn,
            tenant_id: tenant,
            conversation_id: conversation,
            seq: 1,
            prompt: 'run the tests',
            status: 'succeeded',
          })
          .execute();
        await sql`
          INSERT INTO log_events (tenant_id, conversation_id, turn_id, stream, data)
          SELECT ${tenant}::uuid, ${conversation}::uuid, ${turn}::uuid, 'stdout',
            convert_to('PASS src/module-' || n || '.test.ts (' || (n % 97) || ' ms) checksum ' || md5(n::text) || ' ' || md5((n * 7)::text) || E'\n', 'UTF8')
          FROM generate_series(1, ${Math.floor(events / CONVERSATIONS)}) n`.execute(database.db);
      }
      await sql`VACUUM ANALYZE log_events`.execute(database.db);
      const auth = { authorization: `Bearer ${key}` };

      const idle = kib(pid, 'VmRSS');
      // Peak resident set from here on (Linux: writing 5 to clear_refs resets VmHWM to VmRSS).
      writeFileSync(`/proc/${pid}/clear_refs`, '5');
      let sampled = 0;
      const sampler = setInterval(() => {
        sampled = Math.max(sampled, kib(pid, 'VmRSS'));
      }, 10);
      const t0 = performance.now();
      const asked = await fetch(`${base}/api/account/exports`, { method: 'POST', headers: auth });
      if (asked.status !== 202)
        throw new Error(`POST /api/account/exports: ${asked.status} ${await asked.text()}`);
      const { id } = (await asked.json()) as { id: string };
      let view: { status: string; size_bytes: number | null };
      for (;;) {
        view = (await (
          await fetch(`${base}/api/account/exports/${id}`, { headers: auth })
        ).json()) as typeof view;
        if (view.status !== 'pending' && view.status !== 'building') break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const seconds = (performance.now() - t0) / 1000;
      clearInterval(sampler);
      const peak = Math.max(sampled, kib(pid, 'VmHWM'));
      if (view.status !== 'ready') throw new Error(`export ${view.status}`);

      // The download, decompressed on the fly: its size and the number of log rows it holds.
      const res = await fetch(`${base}/api/account/exports/${id}/download`, { headers: auth });
      let bytes = 0;
      let raw = 0;
      let rows = 0;
      let carry = '';
      const marker = '"stream":"stdout"';
      const gunzip = createGunzip();
      gunzip.on('data', (d: Buffer) => {
        raw += d.length;
        // The tail of the previous piece is kept, shorter than the marker: a match is counted once.
        const text = carry + d.toString('latin1');
        rows += text.split(marker).length - 1;
        carry = text.slice(-(marker.length - 1));
      });
      const done = new Promise((r, j) => {
        gunzip.on('end', r);
        gunzip.on('error', j);
      });
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        bytes += chunk.length;
        gunzip.write(chunk);
      }
      gunzip.end();
      await done;
      if (bytes !== view.size_bytes) throw new Error(`downloaded ${bytes} of ${view.size_bytes} bytes`);
      if (rows !== Math.floor(events / CONVERSATIONS) * CONVERSATIONS)
        throw new Error(`the export holds ${rows} of ${events} log rows`);
      results.push({ events, seconds, bytes, raw, idle, peak });
      console.log(
        `${events.toLocaleString('en-US').padStart(9)} log events: built in ${seconds.toFixed(2)} s, ` +
          `${(bytes / 1024 / 1024).toFixed(2)} MiB gzipped (${(raw / 1024 / 1024).toFixed(1)} MiB JSON), ` +
          `server RSS ${mib(idle)} before, peak ${mib(peak)} while building (+${mib(peak - idle)})`,
      );
    } finally {
      server.kill('SIGTERM');
      await new Promise((r) => (server.exitCode !== null ? r(null) : server.once('exit', r)));
    }
  }
  for (let i = 1; i < results.length; i++) {
    const [a, b] = [results[i - 1]!, results[i]!];
    console.log(
      `peak RSS at ${b.events.toLocaleString('en-US')} vs ${a.events.toLocaleString('en-US')} events: ` +
        `${(b.peak / a.peak).toFixed(2)}× for ${(b.events / a.events).toFixed(0)}× the account`,
    );
  }
} finally {
  await database.close();
  await scratch.remove();
}
