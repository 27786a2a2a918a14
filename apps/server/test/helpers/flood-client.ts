// The client side of the flood test (api-hardening.flood.test.ts), run as its own process so
// that building and uploading multi-megabyte bodies never runs on the server's event loop:
// the times it reports are the server's. Reads a job as JSON on stdin, builds every body
// first, then sends them one by one and prints one JSON result per line.
import { request } from 'node:http';
import { text } from 'node:stream/consumers';

/** How long a client waits for an early answer before it sends a body over the limit. */
const EARLY_ANSWER_MS = 1000;
const CHUNK_BYTES = 64 * 1024;

export type FloodBody = { kind: 'sized'; bytes: number } | { kind: 'map'; entries: number; nested: boolean };

export interface FloodJob {
  base: string;
  authorization: string;
  requests: Array<{ method: string; path: string; bodyLimit: number; body: FloodBody }>;
}

export interface FloodResult {
  index: number;
  bytesSent: number;
  status: number;
  ms: number;
  answerBytes: number;
  /** The answer, clipped for failure messages. */
  answer: string;
}

/** `{"env_vars": {"K0": 0, "K1": 0, ...}, "pad": "xx"}` of exactly `bytes` bytes. */
export function mapOfSize(bytes: number): string {
  const parts: string[] = [];
  let size = '{"env_vars":{'.length + '},"pad":""}'.length;
  for (let i = 0; ; i++) {
    const entry = `${i === 0 ? '' : ','}"K${i}":0`;
    if (size + entry.length > bytes) break;
    parts.push(entry);
    size += entry.length;
  }
  return `{"env_vars":{${parts.join('')}},"pad":"${'x'.repeat(bytes - size)}"}`;
}

export function mapOfEntries(n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 0; i < n; i++) out[`K${i}`] = i;
  return out;
}

function build(body: FloodBody, cache: Map<string, Buffer>): Buffer {
  const key = JSON.stringify(body);
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let out: string;
  if (body.kind === 'sized') out = mapOfSize(body.bytes);
  else {
    const map = mapOfEntries(body.entries);
    out = JSON.stringify(
      body.nested
        ? { resources: [{ kind: 'Environment', name: 'f', spec: { env_vars: map } }] }
        : { name: 'f', env_vars: map },
    );
  }
  const bytes = Buffer.from(out, 'utf8');
  cache.set(key, bytes);
  return bytes;
}

/**
 * One request over node:http, sent the way curl sends a large body: in chunks, with
 * backpressure, and no more of it once the server has answered (the server refuses a flood
 * after its first kilobytes). A body over the route's limit waits up to EARLY_ANSWER_MS for
 * the answer to its Content-Length before any of it is sent: Fastify answers that at once
 * and closes the connection, and writing into that close would lose the answer to EPIPE.
 */
function send(
  url: string,
  method: string,
  authorization: string,
  body: Buffer,
  overLimit: boolean,
): Promise<{ status: number; answer: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request(
      url,
      {
        method,
        headers: { authorization, 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, answer: Buffer.concat(chunks).toString('utf8') });
          // The rest of the body is not wanted: stop sending it, as curl does.
          req.destroy();
        });
        res.on('error', reject);
      },
    );
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    const writeBody = async () => {
      for (let at = 0; at < body.length && !answered; at += CHUNK_BYTES) {
        if (!req.write(body.subarray(at, at + CHUNK_BYTES))) {
          await new Promise<void>((r) => {
            req.once('drain', r);
            req.once('response', () => r());
            req.once('close', r);
          });
        }
      }
      if (!answered) req.end();
    };
    req.flushHeaders();
    if (overLimit) setTimeout(() => void (answered ? undefined : writeBody()), EARLY_ANSWER_MS);
    else void writeBody();
  });
}

if (import.meta.main) {
  const job = JSON.parse(await text(process.stdin)) as FloodJob;
  const cache = new Map<string, Buffer>();
  const bodies = job.requests.map((r) => build(r.body, cache));
  for (const [index, r] of job.requests.entries()) {
    const body = bodies[index]!;
    const t0 = performance.now();
    const overLimit = body.length > r.bodyLimit;
    const res = await send(`${job.base}${r.path}`, r.method, job.authorization, body, overLimit).catch(
      (err: unknown) => {
        throw new Error(`${r.method} ${r.path} (${body.length} bytes) failed`, { cause: err });
      },
    );
    const answer = res.answer;
    const result: FloodResult = {
      index,
      bytesSent: body.length,
      status: res.status,
      ms: performance.now() - t0,
      answerBytes: Buffer.byteLength(answer),
      answer: answer.slice(0, 2000),
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  }
}
