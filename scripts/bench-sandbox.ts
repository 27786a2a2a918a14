// Sandbox benchmark: starts a throw-away sandboxd and measures, as medians of several runs,
// create latency, an exec round trip of `true`, checkpoint and restore of 100 MB of files and
// exec stdout throughput, next to the baselines measured in the same run (a bare spawn of
// /bin/true and a bare isolated spawn through unshare) so the ratios stay meaningful across
// machines (design/performance.md).
//
//   node scripts/bench-sandbox.ts [--runs 7] [--json out.json]
//
// With --json the table goes to stdout and the JSON to the file; without it the table goes
// to stderr and the JSON to stdout.
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { startTestSandboxd } from '../apps/sandboxd/test/harness.ts';
import { createSandboxClient, type SandboxClient } from '../packages/sandbox-client/src/index.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' },
    json: { type: 'string' },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 5) throw new Error('--runs must be an integer ≥ 5');

async function timed(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

/** `count` timed runs, each `pauseMs` after the previous one ended (the pause is not timed). */
async function sample(
  count: number,
  run: (index: number) => Promise<unknown>,
  pauseMs = 0,
): Promise<number[]> {
  const samples: number[] = [];
  for (let index = 0; index < count; index++) {
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    samples.push(await timed(() => run(index)));
  }
  return samples;
}

function spawnToExit(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

async function isolatedSpawnBaseline(): Promise<{ label: string; samples: number[] }> {
  const candidates: { label: string; command: string; args: string[] }[] = [
    {
      label: 'unshare --user --map-root-user --pid --fork --mount --net true',
      command: 'unshare',
      args: ['--user', '--map-root-user', '--pid', '--fork', '--mount', '--net', 'true'],
    },
    {
      label: 'unshare --pid --fork --mount --net true',
      command: 'unshare',
      args: ['--pid', '--fork', '--mount', '--net', 'true'],
    },
  ];
  for (const candidate of candidates) {
    try {
      await spawnToExit(candidate.command, candidate.args);
    } catch {
      continue;
    }
    const samples = await sample(Math.max(20, runs), () => spawnToExit(candidate.command, candidate.args));
    return { label: candidate.label, samples };
  }
  throw new Error('no unshare variant runs here: cannot measure the isolated-spawn baseline');
}

async function execThroughput(client: SandboxClient, name: string, bytes: number): Promise<number> {
  let received = 0;
  const started = performance.now();
  const handle = await client.execStream(name, {
    cmd: ['head', '-c', String(bytes), '/dev/zero'],
    onStdout: (chunk) => {
      received += chunk.length;
    },
  });
  const code = await handle.exited;
  const seconds = (performance.now() - started) / 1000;
  if (code !== 0 || received !== bytes)
    throw new Error(`throughput run: exit ${code}, ${received}/${bytes} bytes`);
  return bytes / 1e6 / seconds;
}

const sandboxd = await startTestSandboxd();
const client = createSandboxClient({ baseUrl: sandboxd.url, token: sandboxd.token, timeoutMs: 300_000 });
const figures: Figure[] = [];
const created: string[] = [];
try {
  const bareSpawn = await sample(Math.max(20, runs), () => spawnToExit('/bin/true', []));
  const isolated = await isolatedSpawnBaseline();
  const bareMedian = median(bareSpawn);
  const isolatedMedian = median(isolated.samples);
  figures.push({ name: "spawn('/bin/true')", unit: 'ms', median: bareMedian, samples: bareSpawn });
  figures.push({ name: isolated.label, unit: 'ms', median: isolatedMedian, samples: isolated.samples });

  // Create: a fresh name each run; one unmeasured create first warms the backend.
  const warm = `bench-warm-${process.pid}`;
  created.push(warm);
  await client.create(warm);
  const createSamples = await sample(runs, async (index) => {
    const name = `bench-create-${process.pid}-${index}`;
    created.push(name);
    await client.create(name, { retry: false });
  });
  figures.push({
    name: 'create',
    unit: 'ms',
    median: median(createSamples),
    samples: createSamples,
    goal: '≤ 50 ms',
  });

  // A created sandbox goes on starting after its 201 (init, mounts, proxy listener, write standbys: a few
  // hundred ms of CPU each on a slow day). The exec samples below measure one sandbox on an otherwise idle
  // daemon, so the seven just created are gone first (destroy waits for their teardown), and the CPU settles.
  for (const name of created.splice(1)) await client.destroy(name);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (let index = 0; index < 3; index++) await client.exec(warm, { cmd: ['true'] });
  const execSamples = await sample(Math.max(20, runs), async () => {
    const result = await client.exec(warm, { cmd: ['true'] });
    if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}`);
  });
  const execMedian = median(execSamples);
  figures.push({
    name: 'exec round trip (true)',
    unit: 'ms',
    median: execMedian,
    samples: execSamples,
    baseline: isolated.label,
    ratio: execMedian / isolatedMedian,
    goal: '≤ 3× isolated spawn',
  });

  // File writes as a turn makes them: one, and three at once (a prompt and a runtime's config files),
  // 300 ms apart so each finds the sandbox idle (sandboxd keeps writes started ahead of time: docs/sandboxd.md,
  // "Files").
  const content = 'KEY=value\n'.repeat(40);
  const writeSamples = await sample(
    Math.max(15, runs),
    (index) =>
      client.writeFile(warm, `/tmp/bench/one-${index}`, content, { mode: 0o600, mkdirParents: true }),
    300,
  );
  figures.push({ name: 'file write', unit: 'ms', median: median(writeSamples), samples: writeSamples });
  const threeSamples = await sample(
    Math.max(15, runs),
    (index) =>
      Promise.all(
        [0, 1, 2].map((k) =>
          client.writeFile(warm, `/tmp/bench/three-${index}-${k}`, content, {
            mode: 0o600,
            mkdirParents: true,
          }),
        ),
      ),
    300,
  );
  figures.push({
    name: 'three file writes at once',
    unit: 'ms',
    median: median(threeSamples),
    samples: threeSamples,
  });

  const fill = await client.exec(warm, {
    cmd: [
      'sh',
      '-c',
      'set -e; mkdir -p "$HOME/bench"; i=0; ' +
        'while [ $i -lt 100 ]; do head -c 1048576 /dev/urandom > "$HOME/bench/f$i"; i=$((i+1)); done; ' +
        'du -sk "$HOME/bench" | cut -f1',
    ],
    timeoutMs: 300_000,
  });
  const filledKiB = Number(fill.stdout.toString().trim());
  if (fill.exitCode !== 0 || !(filledKiB >= 100 * 1024)) {
    throw new Error(`filling 100 MB failed (${filledKiB} KiB): ${fill.stderr.toString()}`);
  }
  const checkpointIds: string[] = [];
  const checkpointSamples = await sample(runs, async () => {
    checkpointIds.push((await client.createCheckpoint(warm, { timeoutMs: 300_000 })).id);
  });
  figures.push({
    name: 'checkpoint 100 × 1 MiB',
    unit: 'ms',
    median: median(checkpointSamples),
    samples: checkpointSamples,
  });
  // The newest checkpoint: sandboxd keeps a sandbox's last few only (retention), fewer than --runs may be.
  const lastCheckpoint = checkpointIds.at(-1) ?? '';
  const restoreSamples = await sample(runs, () =>
    client.restoreCheckpoint(warm, lastCheckpoint, { timeoutMs: 300_000 }),
  );
  figures.push({
    name: 'restore 100 × 1 MiB',
    unit: 'ms',
    median: median(restoreSamples),
    samples: restoreSamples,
  });
  // A warm start's first write (the env file) comes right after the restore's answer, while the restarted
  // sandbox is new: its first write standby started with the init (docs/sandboxd.md, "Files").
  const afterRestoreSamples: number[] = [];
  for (let index = 0; index < Math.max(7, runs); index++) {
    await client.restoreCheckpoint(warm, lastCheckpoint, { timeoutMs: 300_000 });
    afterRestoreSamples.push(
      await timed(() => client.writeFile(warm, '/home/sandbox/.bench-env', content, { mode: 0o600 })),
    );
  }
  figures.push({
    name: 'file write right after a restore',
    unit: 'ms',
    median: median(afterRestoreSamples),
    samples: afterRestoreSamples,
  });

  const throughputSamples: number[] = [];
  for (let index = 0; index < runs; index++) {
    throughputSamples.push(await execThroughput(client, warm, 200 * 1024 * 1024));
  }
  figures.push({
    name: 'exec stdout throughput (200 MiB)',
    unit: 'MB/s',
    median: median(throughputSamples),
    samples: throughputSamples,
  });
} finally {
  await Promise.allSettled(created.map((name) => client.destroy(name)));
  await sandboxd.stop();
}

writeReport({ bench: 'sandbox', runs }, figures, { json: values.json });
