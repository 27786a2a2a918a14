// Issue 14, finding 1, written as the attack: flood bodies against every route that takes a
// body (enumerated from the app, never hand-listed). Each answers within 1 s with an error
// under 64 KiB, and /health keeps answering while they are processed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import { after, before, describe, it } from 'node:test';
import { MAX_LISTED_PROBLEMS, scanJsonShape } from '../src/http/json-bounds.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { type FloodBody, type FloodJob, type FloodResult, mapOfEntries } from './helpers/flood-client.ts';

const SECOND_MS = 1000;
const ERROR_MAX_BYTES = 64 * 1024;
const ENTRIES = 300_000;

let t: TestApp;
let admin: TestUser;
let base: string;
before(async () => {
  t = await buildTestApp({ env: { LOG_LEVEL: 'warn' } });
  admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
});
after(async () => {
  await t.close();
});

interface Answer {
  status: number;
  bytes: number;
  ms: number;
  body: string;
}

async function post(method: string, url: string, body: string): Promise<Answer> {
  const t0 = performance.now();
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { ...admin.auth, 'content-type': 'application/json' },
    body,
  });
  const text = await res.text();
  return { status: res.status, bytes: Buffer.byteLength(text), ms: performance.now() - t0, body: text };
}

describe('flood bodies against every route with a body (finding 1)', () => {
  it('answers each flood within 1 s with an error under 64 KiB, while /health keeps answering', async () => {
    const routes = t.app.routeTable
      .filter((r) => ['POST', 'PUT', 'PATCH'].includes(r.method))
      .map((r) => ({ ...r, path: r.url.replaceAll(/:[A-Za-z_]+/g, '0190f0d0-0000-7000-8000-000000000000') }));
    assert.ok(routes.length >= 20, `expected every body route, found ${routes.length}`);
    const floods: Array<{ name: string; body: (limit: number) => FloodBody }> = [
      { name: 'the largest accepted body', body: (limit) => ({ kind: 'sized', bytes: limit }) },
      {
        name: `a ${ENTRIES}-entry env_vars map`,
        body: () => ({ kind: 'map', entries: ENTRIES, nested: false }),
      },
      {
        name: `a ${ENTRIES}-entry map nested in an apply spec`,
        body: () => ({ kind: 'map', entries: ENTRIES, nested: true }),
      },
      { name: 'one byte over the limit', body: (limit) => ({ kind: 'sized', bytes: limit + 1 }) },
    ];
    const requests = routes.flatMap((route) =>
      floods.map((flood) => ({
        method: route.method,
        path: route.path,
        bodyLimit: route.bodyLimit,
        what: `${route.method} ${route.url} with ${flood.name}`,
        body: flood.body(route.bodyLimit),
      })),
    );
    const job: FloodJob = { base, authorization: admin.auth.authorization, requests };

    // The client is another process (it builds the bodies first); /health is probed from
    // this one, so a probe waits exactly as long as the server's event loop is held.
    const client = spawn(process.execPath, [join(import.meta.dirname, 'helpers', 'flood-client.ts')], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    client.stdin.end(JSON.stringify(job));
    const output = text(client.stdout);
    const exited = new Promise<number | null>((resolve) => client.on('exit', resolve));
    const probes: Array<{ status: number; ms: number }> = [];
    let flooding = true;
    const prober = (async () => {
      while (flooding) {
        const t0 = performance.now();
        const res = await fetch(`${base}/health`);
        await res.arrayBuffer();
        probes.push({ status: res.status, ms: performance.now() - t0 });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const code = await exited;
    flooding = false;
    await prober;
    assert.equal(code, 0, 'the flood client finished');

    const results = (await output)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as FloodResult);
    assert.equal(results.length, requests.length);
    const failures: string[] = [];
    for (const a of results) {
      const what = `${requests[a.index]!.what} (${a.bytesSent} bytes)`;
      if (a.status < 400 || a.status >= 500) failures.push(`${what}: status ${a.status}`);
      if (a.answerBytes >= ERROR_MAX_BYTES) failures.push(`${what}: ${a.answerBytes}-byte answer`);
      if (a.ms >= SECOND_MS) failures.push(`${what}: answered in ${a.ms.toFixed(0)} ms`);
      const parsed = JSON.parse(a.answer) as { error?: unknown; message?: unknown };
      if (typeof parsed.error !== 'string' || typeof parsed.message !== 'string')
        failures.push(`${what}: not the API's error shape: ${a.answer.slice(0, 200)}`);
    }
    assert.deepEqual(failures, []);
    assert.ok(probes.length > 0);
    assert.deepEqual(
      probes.filter((p) => p.status !== 200 || p.ms >= SECOND_MS),
      [],
      '/health answered every probe within 1 s',
    );
  });

  it('refuses a 300,000-entry map before parsing it, naming the field, with one problem', async () => {
    const a = await post(
      'POST',
      '/api/apply',
      JSON.stringify({
        resources: [{ kind: 'Environment', name: 'f', spec: { env_vars: mapOfEntries(ENTRIES) } }],
      }),
    );
    assert.equal(a.status, 422);
    assert.deepEqual(JSON.parse(a.body), {
      error: 'validation_failed',
      message: 'validation failed',
      errors: { 'resources.0.spec.env_vars': ['must have at most 1000 entries'] },
    });
  });

  it('checks a map field’s own cap before its entries: 201 numeric env vars are one problem', async () => {
    const a = await post(
      'POST',
      '/api/environments',
      JSON.stringify({ name: 'f', env_vars: mapOfEntries(201) }),
    );
    assert.equal(a.status, 422);
    assert.deepEqual(JSON.parse(a.body).errors, { env_vars: ['must have at most 200 entries'] });
  });

  it(`lists at most ${MAX_LISTED_PROBLEMS} problems and counts the rest`, async () => {
    // 200 entries (within the cap), each with a number where a string belongs.
    const a = await post(
      'POST',
      '/api/environments',
      JSON.stringify({ name: 'f', env_vars: mapOfEntries(200) }),
    );
    assert.equal(a.status, 422);
    const body = JSON.parse(a.body) as { errors: Record<string, string[]>; more_errors: number };
    const listed = Object.values(body.errors).flat().length;
    assert.equal(listed, MAX_LISTED_PROBLEMS);
    assert.equal(listed + body.more_errors, 200);
  });

  it('caps the problems of each resource in a bulk apply answer', async () => {
    const a = await post(
      'POST',
      '/api/apply',
      JSON.stringify({
        resources: [{ kind: 'Environment', name: 'f', spec: { env_vars: mapOfEntries(200) } }],
      }),
    );
    assert.equal(a.status, 200);
    const [result] = JSON.parse(a.body).results as Array<{
      errors: Record<string, string[]>;
      more_errors: number;
    }>;
    assert.equal(Object.values(result!.errors).flat().length, MAX_LISTED_PROBLEMS);
    assert.equal(result!.more_errors, 200 - MAX_LISTED_PROBLEMS);
  });

  it('gives the auth routes a small body limit and apply a large one', () => {
    const limit = (method: string, url: string) =>
      t.app.routeTable.find((r) => r.method === method && r.url === url)?.bodyLimit;
    assert.equal(limit('POST', '/api/auth/login'), 16 * 1024);
    assert.equal(limit('POST', '/api/apply'), 10 * 1024 * 1024);
  });

  it('scans nesting, entry counts and key lengths without parsing', () => {
    assert.equal(scanJsonShape('{"a":[1,2,3],"b":{"c":"}{,\\"]"}}'), null);
    assert.deepEqual(scanJsonShape(`{"a":{"b":${'['.repeat(40)}${']'.repeat(40)}}}`), {
      path: 'a.b.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0',
      message: 'must not nest deeper than 32 levels',
    });
    assert.deepEqual(scanJsonShape(`{"x":[${Array(1001).fill(0).join(',')}]}`), {
      path: 'x',
      message: 'must have at most 1000 entries',
    });
    assert.deepEqual(scanJsonShape(`{"m":{"${'k'.repeat(7000)}":1}}`), {
      path: 'm',
      message: 'keys must be at most 1024 characters',
    });
    // A long string value is the schema's business, not the scanner's.
    assert.equal(scanJsonShape(`{"m":{"k":"${'v'.repeat(7000)}"}}`), null);
  });
});
