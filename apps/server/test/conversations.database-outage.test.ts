// Issue 39, finding 7: PostgreSQL stopped for 10 s in the middle of a turn that prints a
// numbered line every 10 ms (helpers/database-outage.ts: a dedicated PostgreSQL, never the shared
// test database). While it is away /health/ready answers 503, the app stays up, and the server
// logs a few lines, not thousands (the ownership connection is retried with backoff,
// conversations/engine/owner.ts); once it is back the turn's output, buffered in the sandbox, is
// stored whole: every line exactly once. The 30 s figures: `npm run bench -- database-outage`.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { runDatabaseOutage } from './helpers/database-outage.ts';

const LINES = 1500;
const OUTAGE_MS = 10_000;
/** "At most a few log lines per second of outage." */
const MAX_LINES_PER_SECOND = 2;

it('PostgreSQL down for 10 s mid-turn: ready answers 503, few log lines, no busy CPU, every line stored once', async () => {
  const r = await runDatabaseOutage({ outageMs: OUTAGE_MS, lines: LINES });
  assert.ok(r.readyStatuses.length >= 5, JSON.stringify(r.readyStatuses));
  assert.ok(
    r.readyStatuses.every((s) => s === 503),
    `/health/ready during the outage: ${r.readyStatuses}`,
  );
  assert.ok(
    r.healthStatuses.every((s) => s === 200),
    `/health during the outage: ${r.healthStatuses}`,
  );
  assert.ok(
    r.logLines <= MAX_LINES_PER_SECOND * r.outageSeconds,
    `${r.logLines} log lines in ${r.outageSeconds.toFixed(1)} s of outage; the first:\n${r.sampleLines.join('\n')}`,
  );
  // A busy retry loop takes a whole core; waiting for the next attempt takes next to none.
  assert.ok(
    r.cpuSeconds < 0.25 * r.outageSeconds,
    `${r.cpuSeconds} s of CPU in ${r.outageSeconds.toFixed(1)} s of outage`,
  );
  assert.equal(r.turnStatus, 'succeeded');
  assert.equal(r.conversationStatus, 'idle');
  assert.equal(r.stored, r.expected);
  assert.deepEqual(
    r.eventLines,
    Array.from({ length: LINES }, (_, i) => `line ${i + 1}`),
  );
});
