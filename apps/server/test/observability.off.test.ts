// "Nothing loaded and no cost when unset" (issue 40, deliverables 5 and 6): the real boot path in
// a process of its own, with every module it loads recorded (fixtures/telemetry-modules.ts).
// Without OTEL_EXPORTER_OTLP_ENDPOINT and ERROR_TRACKING_DSN no OpenTelemetry SDK, exporter or
// @sentry module is loaded; with them (pointed at a loopback receiver) both are, which shows the
// recording sees them. The one exception is @opentelemetry/api itself: prom-client (the metrics,
// before any of this) requires it for its exemplars; without a provider it is the API's no-op.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../src/db/embedded.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { type LoopbackReceiver, startLoopbackReceiver } from './helpers/loopback-receiver.ts';

const FIXTURE = join(import.meta.dirname, 'fixtures/telemetry-modules.ts');

let database: TestDatabase;
let receiver: LoopbackReceiver;

before(async () => {
  database = await createTestDatabase();
  receiver = await startLoopbackReceiver();
});
after(async () => {
  await receiver?.close();
  await database?.drop();
});

async function bootAndRecord(extra: Record<string, string>): Promise<string[]> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // The test's own environment, without any telemetry variable it may carry.
    if (v !== undefined && !k.startsWith('OTEL_') && k !== 'ERROR_TRACKING_DSN') env[k] = v;
  }
  Object.assign(env, {
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: database.url,
    DATABASE_SSL: 'false',
    MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
    EMAIL_DELIVERY: 'none',
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    METRICS_PORT: '0',
    ...extra,
  });
  const child = spawn(process.execPath, [FIXTURE], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    err += d;
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, `the fixture failed: ${err}`);
  const line = out.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { telemetry: string[] }).telemetry;
}

describe('telemetry off', () => {
  it('loads no OpenTelemetry SDK or Sentry module when neither variable is set', async () => {
    const loaded = await bootAndRecord({});
    assert.deepEqual(
      loaded.filter((u) => !u.includes('/node_modules/@opentelemetry/api/')),
      [],
    );
  });

  it('loads both when both are set (the recording sees them)', async () => {
    const loaded = await bootAndRecord({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      ERROR_TRACKING_DSN: `http://key@127.0.0.1:${receiver.port}/1`,
    });
    assert.ok(
      loaded.some((u) => u.includes('/@opentelemetry/sdk-trace/')),
      loaded.join('\n'),
    );
    assert.ok(
      loaded.some((u) => u.includes('/@sentry/node/')),
      loaded.join('\n'),
    );
    // The spans of the boot and the requests reached the receiver.
    assert.ok(
      receiver.posts.some((p) => p.path === '/v1/traces' && p.body.includes('GET /api/environments')),
    );
  });
});
