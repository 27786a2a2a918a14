// Redaction benchmark: throughput of the streaming redactor (apps/server/src/conversations/
// redactor.ts) over realistic agent output in 64 KiB chunks (the pipe's chunk size), with 100
// and 1,000 registered secrets (each expanding to 4–20 forms: value, base64 × 3 alignments × 2
// alphabets, the JSON, URL and HTML escapes that differ from the value), next to baselines measured in the same run on the same bytes: a plain
// copy of every chunk, one indexOf of one secret per chunk, and one indexOf per secret (the
// approach the scanner replaces). Goal (shared/design/performance.md): ≥ 300 MB/s with 1,000.
// Each throughput is also given per CPU-second of this process (`cpu MB/s`): on a machine shared
// with other work, wall-clock figures drop with the load while that one stays comparable.
//
//   node scripts/bench-redaction.ts [--runs 5] [--mb 64] [--json out.json]
//
// With --json the table goes to stdout and the JSON to the file; without it the table goes
// to stderr and the JSON to stdout.
import { parseArgs } from 'node:util';
import { createSecretRegistry, REDACTION_MARKER } from '../apps/server/src/conversations/log/redactor.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    mb: { type: 'string', default: '64' },
    json: { type: 'string' },
  },
});
const runs = Number(values.runs);
const megabytes = Number(values.mb);
if (!Number.isInteger(runs) || runs < 3) throw new Error('--runs must be an integer ≥ 3');
if (!Number.isInteger(megabytes) || megabytes < 8) throw new Error('--mb must be an integer ≥ 8');

// Deterministic data (mulberry32), so runs and machines compare.
let seed = 20261124;
const random = (n: number): number => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
};
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const HEX = '0123456789abcdef';
const draw = (alphabet: string, length: number): string =>
  Array.from({ length }, () => alphabet[random(alphabet.length)]).join('');

/** Secrets shaped like real ones: provider tokens, hex keys, passwords. */
function makeSecret(k: number): string {
  switch (k % 5) {
    case 0:
      return `sk-live-${draw(ALNUM, 32)}`;
    case 1:
      return `ghp_${draw(ALNUM, 36)}`;
    case 2:
      return draw(HEX, 40);
    case 3:
      return `AKIA${draw(ALNUM.slice(0, 36), 16)}`;
    default:
      return draw(`${ALNUM}!@#%^*-_=+`, 12 + random(20));
  }
}
const secrets = Array.from({ length: 1000 }, (_, k) => makeSecret(k));

const WORDS =
  'the a to of and in is for on with build test error warning ok done running install package src lib index function return const value npm git commit file line'.split(
    ' ',
  );
/** Agent-like output: log lines, paths, hashes, JSON, some base64, a secret now and then. */
function makeOutput(bytes: number): Buffer {
  const lines: string[] = [];
  let size = 0;
  while (size < bytes) {
    let line: string;
    const kind = random(100);
    if (kind < 55) line = Array.from({ length: 4 + random(12) }, () => WORDS[random(WORDS.length)]).join(' ');
    else if (kind < 70)
      line = `src/${draw('abcdefghij', 6)}/${draw('abcdefghij', 8)}.ts:${random(900)}:${random(80)}`;
    else if (kind < 80) line = `commit ${draw(HEX, 40)} (${draw(HEX, 7)})`;
    else if (kind < 90) line = JSON.stringify({ id: random(1e6), status: 'ok', took_ms: random(900) / 10 });
    else if (kind < 97) line = Buffer.from(draw(ALNUM, 30 + random(60))).toString('base64');
    else line = `token=${secrets[random(secrets.length)]}`;
    lines.push(line);
    size += line.length + 1;
  }
  return Buffer.from(`${lines.join('\n')}\n`).subarray(0, bytes);
}

const CHUNK = 64 * 1024;
const input = makeOutput(megabytes * 1024 * 1024);
const chunks: Buffer[] = [];
for (let at = 0; at < input.length; at += CHUNK) chunks.push(input.subarray(at, at + CHUNK));
const mbPerSecond = (bytes: number, ms: number): number => bytes / 1e6 / (ms / 1000);

interface Case {
  name: string;
  data: Buffer[];
  pass: (chunks: Buffer[]) => void;
  wall: number[];
  cpu: number[];
}

let sink = 0; // keeps results observable so nothing is optimised away
const cases: Case[] = [];
const measure = (name: string, data: Buffer[], pass: (chunks: Buffer[]) => void): Case => {
  const entry: Case = { name, data, pass, wall: [], cpu: [] };
  cases.push(entry);
  return entry;
};

const copy = measure('baseline: copy of every chunk', chunks, (list) => {
  for (const chunk of list) sink += Buffer.from(chunk).length;
});
const one = Buffer.from(secrets[0] ?? '');
const indexOfOne = measure('baseline: indexOf of 1 secret', chunks, (list) => {
  for (const chunk of list) sink += chunk.indexOf(one);
});
// One indexOf per secret is ~1000× slower: measured on 1/16 of the input.
const needles = secrets.map((secret) => Buffer.from(secret));
const indexOfEach = measure(
  'indexOf of each of 1,000 secrets',
  chunks.slice(0, Math.ceil(chunks.length / 16)),
  (list) => {
    for (const chunk of list) for (const needle of needles) sink += chunk.indexOf(needle);
  },
);

const redactors: { count: number; states: number; buildMs: number; markers: number; measured: Case }[] = [];
for (const count of [100, 1000]) {
  const registry = createSecretRegistry();
  const buildStarted = performance.now();
  registry.registerAll(secrets.slice(0, count));
  const automaton = registry.matcher();
  const buildMs = performance.now() - buildStarted;
  // Correctness first: every secret in the input is redacted.
  const stream = registry.stream();
  const output = Buffer.concat([...chunks.map((chunk) => stream.write(chunk)), stream.flush()]).toString();
  let markers = 0;
  for (let at = output.indexOf(REDACTION_MARKER); at !== -1; at = output.indexOf(REDACTION_MARKER, at + 1)) {
    markers++;
  }
  if (markers === 0 || secrets.slice(0, count).some((secret) => output.includes(secret))) {
    throw new Error(`redaction with ${count} secrets let a secret through`);
  }
  const measured = measure(`redactor, ${count.toLocaleString('en')} secrets`, chunks, (list) => {
    const redactor = registry.stream();
    for (const chunk of list) sink += redactor.write(chunk).length;
    sink += redactor.flush().length;
  });
  redactors.push({ count, states: automaton.states, buildMs, markers, measured });
}

// Warm-up (JIT, allocator), then the cases in turn in every round, so a change of load on a
// shared machine affects them all alike.
for (const entry of cases) entry.pass(entry.data);
for (let run = 0; run < runs; run++) {
  for (const entry of cases) {
    const bytes = entry.data.reduce((sum, chunk) => sum + chunk.length, 0);
    const cpuStarted = process.cpuUsage();
    const started = performance.now();
    entry.pass(entry.data);
    entry.wall.push(mbPerSecond(bytes, performance.now() - started));
    const used = process.cpuUsage(cpuStarted);
    entry.cpu.push(mbPerSecond(bytes, (used.user + used.system) / 1000));
  }
}

const figures: Figure[] = [];
const figure = (entry: Case, extra: Partial<Figure> = {}): Figure => ({
  name: entry.name,
  unit: 'MB/s',
  median: median(entry.wall),
  samples: entry.wall,
  cpu: median(entry.cpu),
  ...extra,
});
figures.push(figure(copy), figure(indexOfOne), figure(indexOfEach));
for (const { count, states, buildMs, markers, measured } of redactors) {
  const wall = median(measured.wall);
  figures.push(
    figure(measured, {
      name: `${measured.name} (${states.toLocaleString('en')} states, ${markers} markers)`,
      baseline: 'copy',
      ratio: wall / median(copy.wall),
      ...(count === 1000 ? { goal: '≥ 300 MB/s' } : {}),
    }),
    figure(measured, {
      name: `${measured.name} vs indexOf of 1 secret`,
      baseline: 'indexOf of 1 secret',
      ratio: wall / median(indexOfOne.wall),
    }),
    ...(count === 1000
      ? [
          figure(measured, {
            name: `${measured.name} vs indexOf of each secret`,
            baseline: 'indexOf of each of 1,000',
            ratio: wall / median(indexOfEach.wall),
          }),
        ]
      : []),
    { name: `${measured.name}: matcher build`, unit: 'ms', median: buildMs, samples: [buildMs] },
  );
}
if (sink === -1) console.log('');

writeReport(
  { bench: 'redaction', runs, input_mb: Math.round((input.length / 1e6) * 100) / 100, chunk_bytes: CHUNK },
  figures,
  { json: values.json, ratioLabel: (figure) => ` ${figure.baseline}` },
);
