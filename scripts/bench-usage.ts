// The usage meter's cost: what its triggers add to the updates that end a turn and a sandbox
// (each measured against the same update with the trigger disabled, in the same run), and the
// latency of GET /api/account/usage over a month of 100,000 events of one account.
//   node scripts/bench-usage.ts [--rounds 400] [--events 100000] [--json FILE]
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { insertConversation, insertTurn } from '../apps/server/test/helpers/conversation-rows.ts';
import { createVerifiedUser } from '../apps/server/test/helpers/factories.ts';
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '400' },
    events: { type: 'string', default: '100000' },
    json: { type: 'string' },
  },
});
const rounds = Number(values.rounds);
const eventCount = Number(values.events);

const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

const scratch = await startScratchPostgres({ database: 'bench' });
try {
  const { app, deps, close } = await appOnDatabase(scratch.pg.url);
  const db = deps.db;
  const user = await createVerifiedUser(db);

  /** A ready sandbox with a running turn, the state a turn end and a sandbox end start from. */
  const live = async () => {
    const conv = await insertConversation(db, user.id, { status: 'running' });
    const sandbox = uuidv7();
    await db
      .insertInto('sandboxes')
      .values({
        id: sandbox,
        tenant_id: user.id,
        conversation_id: conv.id,
        name: `service-bench-${sandbox.slice(-8)}`,
        status: 'ready',
        ready_at: new Date(Date.now() - 60_000),
      })
      .execute();
    const turn = await insertTurn(db, conv, 1);
    await db
      .updateTable('turns')
      .set({ sandbox_id: sandbox, started_at: new Date(Date.now() - 30_000) })
      .where('id', '=', turn)
      .execute();
    return { sandbox, turn };
  };
  const endTurn = (turn: string) =>
    db
      .updateTable('turns')
      .set({
        status: 'succeeded',
        ended_at: sql<Date>`now()`,
        usage: JSON.stringify({ input_tokens: 1200, output_tokens: 300, cost_usd: 0.01 }),
      })
      .where('id', '=', turn)
      .where('status', 'in', ['queued', 'running'])
      .execute();
  const endSandbox = (sandbox: string) =>
    db
      .updateTable('sandboxes')
      .set({ status: 'terminated', reason: 'idle timeout', ended_at: sql<Date>`now()` })
      .where('id', '=', sandbox)
      .execute();
  const triggers = async (on: boolean) => {
    const verb = sql.raw(on ? 'ENABLE' : 'DISABLE');
    await sql`ALTER TABLE turns ${verb} TRIGGER usage_turn_ended`.execute(db);
    await sql`ALTER TABLE sandboxes ${verb} TRIGGER usage_sandbox_ended`.execute(db);
  };

  const samples = {
    turnOn: [] as number[],
    turnOff: [] as number[],
    sbxOn: [] as number[],
    sbxOff: [] as number[],
  };
  for (let i = 0; i < rounds; i++) {
    // Alternating, so drift weighs on both series alike.
    const on = i % 2 === 0;
    await triggers(on);
    const { sandbox, turn } = await live();
    let t0 = process.hrtime.bigint();
    await endTurn(turn);
    (on ? samples.turnOn : samples.turnOff).push(ms(t0));
    t0 = process.hrtime.bigint();
    await endSandbox(sandbox);
    (on ? samples.sbxOn : samples.sbxOff).push(ms(t0));
  }
  await triggers(true);

  // A month of events for the account: half sandboxes, half turns over four models.
  await sql`
    INSERT INTO usage_events (tenant_id, kind, subject_id, conversation_id, status, runtime, model,
      started_at, ready_at, ended_at, busy_seconds, parked_seconds, input_tokens, output_tokens, cost_usd)
    SELECT ${user.id}::uuid, CASE WHEN g % 2 = 0 THEN 'sandbox' ELSE 'turn' END, gen_random_uuid(), gen_random_uuid(),
      'terminated', 'claude', 'anthropic/model-' || (g % 4), ts, ts, ts + interval '1 hour', 600, 3000, 1000, 100, 0.01
    FROM generate_series(1, ${eventCount}) g,
      LATERAL (SELECT timestamptz '2026-03-01' + (g % 2592000) * interval '1 second' AS ts) t`.execute(db);
  await sql`ANALYZE usage_events`.execute(db);
  const summary: number[] = [];
  for (let i = 0; i < 5; i++)
    await app.inject({ url: '/api/account/usage?from=2026-03-01&to=2026-04-01', headers: user.auth });
  for (let i = 0; i < 30; i++) {
    const t0 = process.hrtime.bigint();
    const res = await app.inject({
      url: '/api/account/usage?from=2026-03-01&to=2026-04-01',
      headers: user.auth,
    });
    summary.push(ms(t0));
    if (res.statusCode !== 200) throw new Error(`usage answered ${res.statusCode}: ${res.body}`);
  }

  const figure = (name: string, s: number[], base?: { name: string; s: number[] }): Figure => ({
    name,
    unit: 'ms',
    median: median(s),
    samples: s,
    ...(base ? { baseline: base.name, ratio: median(s) / median(base.s) } : {}),
  });
  writeReport(
    { bench: 'usage', rounds, events: eventCount },
    [
      figure('turn end, unmetered', samples.turnOff),
      figure('turn end, metered', samples.turnOn, { name: 'turn end, unmetered', s: samples.turnOff }),
      figure('sandbox end, unmetered', samples.sbxOff),
      figure('sandbox end, metered', samples.sbxOn, { name: 'sandbox end, unmetered', s: samples.sbxOff }),
      figure(`GET /api/account/usage, ${eventCount} events`, summary),
    ],
    { json: values.json },
  );
  await close();
} finally {
  await scratch.remove();
}
