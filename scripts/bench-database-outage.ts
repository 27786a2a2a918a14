// Fault benchmark: PostgreSQL down for 30 s in the middle of a turn that prints a numbered line
// every 10 ms (issue 39, finding 7; apps/server/test/helpers/database-outage.ts: a dedicated
// embedded PostgreSQL stopped with a fast shutdown and started again on the same port). Reports
// the log lines the server wrote per second of outage and the CPU time it used meanwhile, and
// checks the turn's stored output: every line once, none lost.
// Goals: at most a few log lines per second of outage; no busy CPU; 0 lines lost or doubled.
//
//   node scripts/bench-database-outage.ts [--seconds 30] [--runs 1] [--json out.json]
import { parseArgs } from 'node:util';
import { runDatabaseOutage } from '../apps/server/test/helpers/database-outage.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '30' },
    runs: { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
const seconds = Number(values.seconds);
const runs = Number(values.runs);
if (!Number.isFinite(seconds) || seconds < 2) throw new Error('--seconds must be a number ≥ 2');
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a positive integer');
// The turn outlasts the outage: it prints for about 1.5 × the outage (a line takes ~12 ms).
const lines = Math.round((seconds * 1000 * 1.5) / 12);

const perSecond: number[] = [];
const cpu: number[] = [];
const wrong: number[] = [];
for (let run = 0; run < runs; run++) {
  const r = await runDatabaseOutage({ outageMs: seconds * 1000, lines });
  perSecond.push(r.logLines / r.outageSeconds);
  cpu.push(r.cpuSeconds);
  const stored = r.stored.split('\n').filter((l) => l !== '');
  const printed = r.expected.split('\n').filter((l) => l !== '');
  const unique = new Set(stored);
  const lost = printed.filter((l) => !unique.has(l)).length;
  wrong.push(lost + (stored.length - unique.size));
  const ready = r.readyStatuses.every((s) => s === 503) ? '503 throughout' : r.readyStatuses.join(',');
  const up = r.healthStatuses.every((s) => s === 200) ? 'up' : r.healthStatuses.join(',');
  console.error(
    `run ${run + 1}: ${r.logLines} lines in ${r.outageSeconds.toFixed(1)} s down, ${r.cpuSeconds} s CPU, /health/ready ${ready}, app ${up}, turn ${r.turnStatus}, conversation ${r.conversationStatus}`,
  );
}
const figures: Figure[] = [
  {
    name: 'log lines per second of outage',
    unit: 'lines/s',
    median: median(perSecond),
    samples: perSecond,
    goal: '≤ 3',
  },
  {
    name: `server CPU during ${seconds} s down`,
    unit: 's',
    median: median(cpu),
    samples: cpu,
    goal: 'no busy loop',
  },
  { name: 'lines lost or stored twice', unit: 'lines', median: median(wrong), samples: wrong, goal: '0' },
];
writeReport({ benchmark: 'database-outage', runs, seconds, lines }, figures, { json: values.json });
