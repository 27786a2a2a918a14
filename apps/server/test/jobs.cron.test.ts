// The crontab (jobs/cron.ts) on graphile-worker: two job runners on one database, as two
// replicas run them, fire each scheduled run once between them; a run missed while no runner
// ran fires once when they come back (the missed-run rule); a run's log line and metrics.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { type DatabaseHandle, openDatabase } from '../src/db/database.ts';
import { backfillMs, cronItems, cronTasks } from '../src/jobs/cron.ts';
import { runScheduledJob } from '../src/jobs/run-job.ts';
import type { ScheduledJob } from '../src/jobs/scheduled-job.ts';
import { type JobRunner, startJobRunner } from '../src/jobs/worker.ts';
import { jobTask } from '../src/tasks/job-task.ts';
import { TaskUsageError } from '../src/tasks/task.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';

let t: TestApp;
let second: DatabaseHandle;

before(async () => {
  t = await buildTestApp();
  second = openDatabase({ connectionString: t.database.url, max: 4, connectionTimeoutMillis: 3000 });
});
after(async () => {
  await second?.close();
  await t?.close();
});

/** A job that records which runner ran it, at what `now`. */
function probe(
  name: string,
  crontab: string,
  runs: { runner: string; now: Date }[],
  runner: string,
): ScheduledJob {
  return {
    name,
    description: 'test probe',
    crontab,
    async run({ now, print }) {
      runs.push({ runner, now });
      print(`probe ran on ${runner}`);
      return { acted: 1, failures: 0, summary: 'probed 1 thing' };
    },
  };
}

/** Both runners, each with its own pool and its own copy of the crontab, as two replicas have. */
async function twoRunners(name: string, crontab: string, runs: { runner: string; now: Date }[]) {
  const runners: JobRunner[] = [];
  for (const [runner, pool] of [
    ['a', t.deps.database.pool],
    ['b', second.pool],
  ] as const) {
    const job = probe(name, crontab, runs, runner);
    runners.push(
      await startJobRunner({
        pool,
        logger: t.deps.logger,
        tasks: cronTasks([job], t.deps),
        schedule: cronItems([job]),
        pollIntervalMs: 100,
      }),
    );
  }
  return async () => {
    for (const r of runners) await r.stop();
  };
}

describe('the crontab', () => {
  it('fires a job once per scheduled minute across two job runners on one database', async () => {
    // Start a few seconds into a minute, so both runners are up before the next one begins.
    const seconds = new Date().getUTCSeconds();
    if (seconds > 45) await sleep((62 - seconds) * 1000);
    const runs: { runner: string; now: Date }[] = [];
    const stop = await twoRunners('every-minute', '* * * * *', runs);
    try {
      const boundary = Math.ceil(Date.now() / 60_000) * 60_000;
      await sleep(boundary - Date.now() + 8000);
      assert.equal(runs.length, 1, `one run, not one per runner: ${JSON.stringify(runs)}`);
      const [run] = runs;
      assert.ok(run && run.now.getTime() >= boundary, 'it ran at the minute');
    } finally {
      await stop();
    }
    const metrics = await t.deps.metrics.registry.metrics();
    assert.match(metrics, /paddock_job_runs_total\{job="every-minute",outcome="ok"\} 1$/m);
    assert.match(metrics, /paddock_job_items_total\{job="every-minute"\} 1$/m);
    assert.match(metrics, /paddock_job_duration_seconds_count\{job="every-minute"\} 1$/m);
    const line = t.logs.find((l) => l.includes('every-minute: probed 1 thing'));
    assert.ok(line, 'one log line per run');
    assert.match(line, /"acted":1/);
    assert.match(line, /"durationMs":\d+/);
  });

  it('a run missed while no runner ran fires once when they come back, if it was due within one interval', async () => {
    // Hourly at the minute that passed 2 minutes ago; the runners were last up 62 minutes ago,
    // so one run (2 minutes ago) was missed, within the 59 minutes the rule reaches back.
    const due = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 2 * 60_000);
    const crontab = `${due.getUTCMinutes()} * * * *`;
    assert.equal(backfillMs(crontab), 59 * 60_000);
    await sql`
      INSERT INTO graphile_worker._private_known_crontabs (identifier, known_since, last_execution)
      VALUES ('upkeep:hourly-probe', now() - interval '3 hours', now() - interval '62 minutes')`.execute(
      t.deps.db,
    );
    const runs: { runner: string; now: Date }[] = [];
    const stop = await twoRunners('hourly-probe', crontab, runs);
    try {
      const deadline = Date.now() + 15_000;
      while (runs.length === 0 && Date.now() < deadline) await sleep(100);
      await sleep(2000); // time for a second run, were there one
      assert.equal(runs.length, 1, JSON.stringify(runs));
    } finally {
      await stop();
    }
  });

  it('the missed-run window is one interval of each job, less a minute', () => {
    assert.equal(backfillMs('7 * * * *'), 59 * 60_000);
    assert.equal(backfillMs('23 4 * * *'), (24 * 60 - 1) * 60_000);
    assert.equal(backfillMs('*/10 * * * *'), 9 * 60_000);
  });
});

describe('a run of a scheduled job', () => {
  const failing: ScheduledJob = {
    name: 'always-throws',
    description: 'test probe',
    crontab: '0 0 1 1 *',
    async run() {
      throw new Error('the backend is down');
    },
  };
  const partly: ScheduledJob = {
    name: 'partly-fails',
    description: 'test probe',
    crontab: '0 0 1 1 *',
    async run({ dryRun, print }) {
      print(dryRun ? 'would act on a' : 'acted on a');
      print('failed on b');
      return { acted: 1, failures: 1, summary: 'acted on 1, failed on 1' };
    },
  };

  it('that throws is logged at error, counted as failed, and rethrown', async () => {
    await assert.rejects(
      runScheduledJob(failing, {
        deps: t.deps,
        now: new Date(),
        dryRun: false,
        print: () => {},
        trigger: 'cron',
      }),
      /the backend is down/,
    );
    const metrics = await t.deps.metrics.registry.metrics();
    assert.match(metrics, /paddock_job_runs_total\{job="always-throws",outcome="failed"\} 1$/m);
    assert.match(metrics, /paddock_job_failures_total\{job="always-throws"\} 1$/m);
    const line = t.logs.find((l) => l.includes('scheduled job always-throws failed'));
    assert.ok(line);
    assert.match(line, /"level":"error"/);
  });

  it('as a task prints its lines and summary, and fails when items failed; --dry-run reaches the job', async () => {
    const task = jobTask(partly);
    assert.equal(task.usage, 'partly-fails [--dry-run]');
    const lines: string[] = [];
    await assert.rejects(
      task.run({ deps: t.deps, args: ['--dry-run'], print: (l) => lines.push(l) }),
      /partly-fails: 1 item\(s\) failed/,
    );
    assert.deepEqual(lines, ['would act on a', 'failed on b', 'dry run: acted on 1, failed on 1']);
    await assert.rejects(task.run({ deps: t.deps, args: ['--force'], print: () => {} }), TaskUsageError);
  });
});
