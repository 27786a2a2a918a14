// Conversation log benchmark: the single log writer (redaction with 100 registered secrets,
// batched fenced INSERTs, feed wake-ups) persisting agent-like output AND delivering it to 10
// SSE viewers of the real app, next to a ceiling measured in the same run on the same database:
// 100-row multi-row INSERT batches of the same row size into a table shaped like log_events,
// one batch after another on one connection (as the single writer does).
// Goals (issue 9): throughput ≥ 0.6 × the ceiling; viewer p99 ≤ 50 ms from write to SSE receipt
// (measured at a steady 1 MB/s, below saturation: at saturation latency is queueing by design).
//
//   node scripts/bench-conversations-log.ts [--runs 9] [--mb 16] [--json out.json]
//   BENCH_VIEWERS=0 (the writer alone), BENCH_DEBUG=1 (timings and CPU by thread per run)

import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import type { LogWriter } from '../apps/server/src/conversations/contracts.ts';
import { createSecretRegistry, type SecretRegistry } from '../apps/server/src/conversations/log/redactor.ts';
import { openDatabase } from '../apps/server/src/db/database.ts';
import { insertConversation } from '../apps/server/test/helpers/conversation-rows.ts';
import { createVerifiedUser } from '../apps/server/test/helpers/factories.ts';
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';
import { cpuDiff, cpuSnapshot } from './bench-cpu.ts';
import { type Figure, median, writeReport } from './bench-report.ts';

const { values } = parseArgs({
  options: {
    // Nine: the ceiling is bound by the disk's flushes, and one command saw it range from 73 to
    // 161 MB/s between runs; the median of three pairs moved by half of that (docs/performance.md).
    runs: { type: 'string', default: '9' },
    mb: { type: 'string', default: '16' },
    json: { type: 'string' },
  },
});
const runs = Number(values.runs);
const megabytes = Number(values.mb);
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a positive integer');
if (!Number.isInteger(megabytes) || megabytes < 2) throw new Error('--mb must be an integer ≥ 2');

const VIEWERS = Number(process.env['BENCH_VIEWERS'] ?? 10);
/** BENCH_DEBUG=1: print each sustained run's timings and the CPU each thread spent in it. */
const debug = Boolean(process.env['BENCH_DEBUG']);
const SECRETS = 100;
const CHUNK = 16 * 1024;
const PACED_CHUNK = 4 * 1024;
const PACED_INTERVAL_MS = 4; // ≈ 1 MB/s
const PACED_SECONDS = 4;
const CEILING_ROWS = 100;

let seed = 20261124;
const random = (n: number): number => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
};
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const draw = (length: number): string => Array.from({ length }, () => ALNUM[random(ALNUM.length)]).join('');
const secrets = Array.from({ length: SECRETS }, (_, k) => `sk-bench-${k}-${draw(28)}`);
const WORDS =
  'the a to of and in is for on with build test error warning ok done running install package src'.split(' ');

/** One chunk of agent-like output, starting with a `#seq n` tag the viewers look for. */
function chunkOf(seq: number, size: number): Buffer {
  const lines = [`#seq ${seq} #`];
  let length = lines[0]!.length + 1;
  while (length < size) {
    const kind = random(100);
    const line =
      kind < 70
        ? Array.from({ length: 4 + random(12) }, () => WORDS[random(WORDS.length)]).join(' ')
        : kind < 97
          ? `src/${draw(8)}.ts:${random(900)}: ${draw(20)}`
          : `token=${secrets[random(secrets.length)]}`;
    lines.push(line);
    length += line.length + 1;
  }
  return Buffer.from(`${lines.join('\n')}\n`).subarray(0, size);
}

/** One request to the viewers' worker and its answer. */
function ask<T>(worker: Worker, message: Record<string, unknown>): Promise<T> {
  return new Promise((resolve, reject) => {
    worker.once('message', (answer: { type: string; lastIds?: number[] }) =>
      answer.type === 'timeout'
        ? reject(new Error(`viewers timed out at ${answer.lastIds}`))
        : resolve(answer as T),
    );
    worker.postMessage(message);
  });
}

const percentile = (samples: number[], p: number): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

// The viewers run in a worker thread, so parsing what they receive does not take the server's
// event loop (in production viewers are other machines).
interface Viewer {
  lastId: number;
  /** seq → receipt time (epoch ms, comparable across threads). */
  seen: Map<number, number>;
  close(): void;
}

const EVENT_START = Buffer.from('\nid: ');
const SEQ_TAG = Buffer.from('#seq ');
const SEQ_END = Buffer.from(' #');
/** A chunk of the body that ends on whole events (each frame is written whole: one HTTP chunk). */
const CHUNK_END = Buffer.from('\n\n\r\n');
/** Longer than any pattern the viewer looks for (an event start with its id, a tag). */
const SEAM = 48;

/**
 * A light SSE client: HTTP/1.1 over a plain socket that reads into one reused buffer (no buffer
 * allocated per read, no HTTP parser, no decoding, no JSON.parse), looking in the bytes as
 * received for event starts (`id: N` at the start of a line: inside `data:` JSON a newline is
 * always escaped) and the bench's `#seq n #` tags. What a viewer costs is the viewer's, not the
 * service's: in production viewers are other machines; here they share this machine's two cores.
 */
function openViewer(url: string, auth: Record<string, string>): Promise<Viewer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    // The newest event whose start was seen; it is whole once a later one starts or the body so
    // far ends on a chunk that ends an event.
    let started = 0;
    let seam: Buffer = Buffer.alloc(0);
    let headers = true;
    const viewer: Viewer = { lastId: 0, seen: new Map(), close: () => socket.destroy() };
    /** Finds event starts and tags in `bytes` (a match seen twice at a seam is idempotent). */
    const scan = (bytes: Buffer, now: number): void => {
      let at = bytes.indexOf(EVENT_START);
      while (at >= 0) {
        const digits = at + EVENT_START.length;
        const newline = bytes.indexOf(10, digits);
        if (newline < 0) break; // cut at the end: the seam sees it whole
        const id = Number(bytes.toString('latin1', digits, newline));
        if (id > started) {
          viewer.lastId = Math.max(viewer.lastId, started);
          started = id;
        }
        at = bytes.indexOf(EVENT_START, newline);
      }
      let tag = bytes.indexOf(SEQ_TAG);
      while (tag >= 0) {
        const end = bytes.indexOf(SEQ_END, tag + SEQ_TAG.length);
        if (end < 0) break;
        const seq = Number(bytes.toString('latin1', tag + SEQ_TAG.length, end));
        if (!viewer.seen.has(seq)) viewer.seen.set(seq, now);
        tag = bytes.indexOf(SEQ_TAG, end);
      }
    };
    const socket = net.connect({
      host: target.hostname,
      port: Number(target.port),
      onread: {
        buffer: Buffer.allocUnsafe(256 * 1024),
        callback: (length: number, buffer: Uint8Array) => {
          const now = performance.timeOrigin + performance.now();
          const chunk = Buffer.from(buffer.buffer, buffer.byteOffset, length);
          if (headers) {
            if (!chunk.toString('latin1', 0, 16).startsWith('HTTP/1.1 200')) {
              reject(new Error(`viewer: ${chunk.toString('latin1', 0, 200)}`));
              return false;
            }
            headers = false;
            resolve(viewer);
          }
          if (seam.length > 0) scan(Buffer.concat([seam, chunk.subarray(0, SEAM)]), now);
          scan(chunk, now);
          const edge = Buffer.concat([seam, chunk.subarray(Math.max(0, length - SEAM))]);
          seam = Buffer.from(edge.subarray(Math.max(0, edge.length - SEAM)));
          if (seam.subarray(-CHUNK_END.length).equals(CHUNK_END))
            viewer.lastId = Math.max(viewer.lastId, started);
          return true;
        },
      },
    });
    socket.on('error', reject);
    const lines = [
      `GET ${target.pathname}${target.search} HTTP/1.1`,
      `Host: ${target.host}`,
      'Accept: text/event-stream',
    ];
    for (const [name, value] of Object.entries(auth)) lines.push(`${name}: ${value}`);
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

if (!isMainThread) {
  let viewers: Viewer[] = [];
  parentPort!.on(
    'message',
    async (message: {
      cmd: string;
      url?: string;
      auth?: Record<string, string>;
      count?: number;
      last?: number;
    }) => {
      if (message.cmd === 'open') {
        viewers = await Promise.all(
          Array.from({ length: message.count! }, () => openViewer(message.url!, message.auth!)),
        );
        parentPort!.postMessage({ type: 'opened' });
      } else if (message.cmd === 'wait') {
        const deadline = Date.now() + 120_000;
        while (!viewers.every((v) => v.lastId >= message.last!)) {
          if (Date.now() > deadline) {
            parentPort!.postMessage({ type: 'timeout', lastIds: viewers.map((v) => v.lastId) });
            return;
          }
          await new Promise((r) => setTimeout(r, 1));
        }
        const at = performance.timeOrigin + performance.now();
        parentPort!.postMessage({ type: 'done', at, seen: viewers.map((v) => [...v.seen]) });
        for (const v of viewers) v.close();
        viewers = [];
      }
    },
  );
} else {
  const scratch = await startScratchPostgres({ database: 'bench' });
  try {
    const { app, deps, database, close } = await appOnDatabase(scratch.pg.url, {
      RATE_LIMIT_MAX: '100000000',
      LOG_OUTPUT_BUDGET_MB: '0',
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const user = await createVerifiedUser(database.db);
    const viewers = new Worker(new URL(import.meta.url));
    const ceilingDb = openDatabase({ connectionString: scratch.pg.url, max: 2 });
    // log_events' columns, identity, check, storage and index (not its foreign key).
    await ceilingDb.pool.query(`CREATE TABLE bench_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id uuid NOT NULL, conversation_id uuid NOT NULL, turn_id uuid,
    stream text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'stage')),
    data bytea, stage text, state text, duration_ms integer, message text,
    created_at timestamptz NOT NULL DEFAULT now())`);
    await ceilingDb.pool.query('ALTER TABLE bench_log ALTER COLUMN data SET STORAGE EXTERNAL');
    await ceilingDb.pool.query('CREATE INDEX ON bench_log (conversation_id, id)');

    const registry = (): SecretRegistry => {
      const r = createSecretRegistry();
      r.registerAll(secrets);
      return r;
    };
    const setup = async () => {
      const conversation = await insertConversation(database.db, user.id);
      await ask(viewers, {
        cmd: 'open',
        url: `${base}/api/conversations/${conversation.id}/stream`,
        auth: user.auth,
        count: VIEWERS,
      });
      const writer: LogWriter = deps.logWriters.create({
        lease: { tenantId: user.id, conversationId: conversation.id, epoch: conversation.epoch },
        registry: registry(),
      });
      await new Promise((r) => setTimeout(r, 100)); // viewers connected and listening
      return { conversation, writer };
    };
    const lastIdOf = async (conversationId: string) =>
      Number(
        (
          await database.pool.query<{ id: number }>(
            'SELECT max(id) AS id FROM log_events WHERE conversation_id = $1',
            [conversationId],
          )
        ).rows[0]?.id ?? 0,
      );

    const throughput: number[] = [];
    const ceiling: number[] = [];
    const ratios: number[] = [];
    const p99s: number[] = [];
    const p50s: number[] = [];
    const total = megabytes * 1024 * 1024;
    // The output is made once, before the first run: making it allocates about three times its
    // size in strings and arrays, garbage that a run would otherwise collect on the server's
    // thread (the benchmark shares the server's process; an agent's output reaches a real server
    // over a socket, already made).
    const chunks = Array.from({ length: Math.ceil(total / CHUNK) }, (_, i) => chunkOf(i, CHUNK));
    for (let run = 0; run < runs; run++) {
      // 1. Sustained: write as fast as output arrives from a busy agent, until persisted and delivered.
      const { conversation, writer } = await setup();
      const cpu0 = debug ? cpuSnapshot() : null;
      const started = performance.timeOrigin + performance.now();
      for (let i = 0; i < chunks.length; i++) {
        writer.output('stdout', chunks[i]!);
        if (i % 16 === 15) await new Promise((r) => setImmediate(r)); // let batches and viewers run
      }
      await writer.close();
      const persisted = performance.timeOrigin + performance.now() - started;
      const last = await lastIdOf(conversation.id);
      const delivered = await ask<{ at: number }>(viewers, { cmd: 'wait', last });
      if (cpu0)
        console.error(
          `sustained: persisted in ${Math.round(persisted)} ms, delivered in ${Math.round(delivered.at - started)} ms; ` +
            `CPU by thread ${cpuDiff(cpu0, cpuSnapshot())}`,
        );
      const seconds = (delivered.at - started) / 1000;
      const mbps = total / 1024 / 1024 / seconds;
      throughput.push(mbps);
      const rows = await database.pool.query<{ n: number; bytes: number }>(
        `SELECT count(*)::int AS n, sum(length(data))::bigint AS bytes FROM log_events WHERE conversation_id = $1`,
        [conversation.id],
      );
      const rowSize = Math.round(Number(rows.rows[0]!.bytes) / rows.rows[0]!.n);

      // 2. The ceiling: the same bytes as 100-row INSERT batches of rows of the same size.
      const rowData = Buffer.concat(chunks.slice(0, Math.ceil(rowSize / CHUNK))).subarray(0, rowSize);
      const batches = Math.ceil(total / rowSize / CEILING_ROWS);
      const placeholders = Array.from(
        { length: CEILING_ROWS },
        (_, i) => `($1::uuid, $2::uuid, 'stdout', $${i + 3}::bytea)`,
      ).join(', ');
      const ceilingCpu = debug ? cpuSnapshot() : null;
      const ceilingStarted = performance.now();
      for (let batch = 0; batch < batches; batch++) {
        await ceilingDb.pool.query(
          `INSERT INTO bench_log (tenant_id, conversation_id, stream, data) VALUES ${placeholders}`,
          [user.id, conversation.id, ...Array.from({ length: CEILING_ROWS }, () => rowData)],
        );
      }
      const ceilingMs = performance.now() - ceilingStarted;
      const ceilingMbps = (batches * CEILING_ROWS * rowSize) / 1024 / 1024 / (ceilingMs / 1000);
      if (ceilingCpu)
        console.error(
          `ceiling: ${Math.round(ceilingMs)} ms; CPU by thread ${cpuDiff(ceilingCpu, cpuSnapshot())}`,
        );
      ceiling.push(ceilingMbps);
      ratios.push(mbps / ceilingMbps);
      await ceilingDb.pool.query('TRUNCATE bench_log');

      // 3. Latency at a steady 1 MB/s: write time → SSE receipt, for every chunk and viewer.
      const paced = await setup();
      const written = new Map<number, number>();
      const count = Math.floor((PACED_SECONDS * 1000) / PACED_INTERVAL_MS);
      for (let i = 0; i < count; i++) {
        const chunk = chunkOf(i, PACED_CHUNK);
        written.set(i, performance.timeOrigin + performance.now());
        paced.writer.output('stdout', chunk);
        await new Promise((r) => setTimeout(r, PACED_INTERVAL_MS));
      }
      await paced.writer.close();
      const pacedLast = await lastIdOf(paced.conversation.id);
      const received = await ask<{ seen: [number, number][][] }>(viewers, { cmd: 'wait', last: pacedLast });
      const latencies: number[] = [];
      for (const seen of received.seen) {
        const bySeq = new Map(seen);
        for (const [seq, at] of written) {
          const got = bySeq.get(seq);
          if (got !== undefined) latencies.push(got - at);
        }
      }
      p50s.push(percentile(latencies, 50));
      p99s.push(percentile(latencies, 99));
    }
    await ceilingDb.close();
    await viewers.terminate();
    await close();

    const figures: Figure[] = [
      {
        name: `log persisted + delivered to ${VIEWERS} viewers (${SECRETS} secrets)`,
        unit: 'MB/s',
        median: median(throughput),
        samples: throughput,
        baseline: 'batched INSERT ceiling',
        ratio: median(ratios),
        goal: '≥ 0.6×',
      },
      {
        name: 'batched INSERT ceiling (100-row batches)',
        unit: 'MB/s',
        median: median(ceiling),
        samples: ceiling,
      },
      { name: 'viewer latency p50 at 1 MB/s', unit: 'ms', median: median(p50s), samples: p50s },
      {
        name: 'viewer latency p99 at 1 MB/s',
        unit: 'ms',
        median: median(p99s),
        samples: p99s,
        goal: '≤ 50 ms',
      },
    ];
    writeReport(
      { benchmark: 'conversations-log', runs, megabytes, viewers: VIEWERS, secrets: SECRETS },
      figures,
      {
        json: values.json,
      },
    );
  } finally {
    await scratch.remove();
  }
}
