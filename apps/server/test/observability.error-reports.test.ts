// Error reports (issue 40, deliverable 6; observability/error-reports.ts): ERROR_TRACKING_DSN points
// at a loopback receiver speaking the envelope endpoint (`/api/<project>/envelope/`). The real
// app's error handler reports a failing request whose error quotes a registered secret value,
// the request's bearer key and the deployment's sandbox token; the envelope arrives and holds
// none of them, nor the request's credentials, cookies or body.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { parseConfig } from '../src/config/config.ts';
import { createSecretRegistry, REDACTION_MARKER } from '../src/conversations/log/redactor.ts';
import { errorReportsEnabled, reportError, SCRUBBED } from '../src/observability/error-reports.ts';
import { createLogger } from '../src/observability/logger.ts';
import { observedTasks, startTelemetry, type Telemetry } from '../src/server.ts';
import { buildTestApp, type TestApp, testEnv } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { type LoopbackReceiver, startLoopbackReceiver } from './helpers/loopback-receiver.ts';

const SECRET = `registered-secret-${randomBytes(6).toString('hex')}`;
const SANDBOX_TOKEN = `sandbox-token-${randomBytes(8).toString('hex')}`;
const COOKIE_VALUE = `session-${randomBytes(8).toString('hex')}`;
const BODY_VALUE = `body-field-${randomBytes(8).toString('hex')}`;

let receiver: LoopbackReceiver;
let telemetry: Telemetry;
let t: TestApp;
let user: TestUser;
// Held for the whole test: a registry is tracked weakly, as a live conversation's is.
let registry: ReturnType<typeof createSecretRegistry>;

/** The envelopes received so far, each as its lines parsed (header, item header, item, ...). */
const envelopes = () =>
  receiver.posts
    .filter((p) => /^\/api\/4242\/envelope\/?/.test(p.path))
    .map((p) => ({ raw: p.body, items: p.body.split('\n').filter((l) => l.trim() !== '') }));

async function waitForEnvelopes(count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (envelopes().length < count && Date.now() < deadline) {
    await telemetry.errorReports?.flush(2000);
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  receiver = await startLoopbackReceiver();
  const env = {
    ERROR_TRACKING_DSN: `http://publickey@127.0.0.1:${receiver.port}/4242`,
    SANDBOX_TOKEN,
  };
  const { config } = parseConfig(testEnv(env));
  // Before the app, as startServer does: registries created from now on are tracked.
  telemetry = await startTelemetry(config, createLogger({ level: 'silent' }));
  registry = createSecretRegistry();
  assert.equal(registry.register(SECRET), true);
  t = await buildTestApp({
    env,
    routes: (app) => {
      app.post('/api/test-failure', { config: { schemaless: true } }, async (request) => {
        throw new Error(
          `the work failed with ${SECRET} for ${request.headers.authorization} on ${SANDBOX_TOKEN}`,
        );
      });
    },
  });
  user = await createVerifiedUser(t.deps.db);
});
after(async () => {
  await t?.close();
  await telemetry?.stop();
  await receiver?.close();
});

describe('error reports', () => {
  it('refuses to boot on a malformed DSN, naming the variable', () => {
    for (const bad of ['not a url', 'ftp://key@host/1', 'https://host/1', 'https://key@host/']) {
      assert.throws(
        () => parseConfig(testEnv({ ERROR_TRACKING_DSN: bad })),
        (err: Error) => err.message.includes('ERROR_TRACKING_DSN') && !err.message.includes(bad),
        bad,
      );
    }
    assert.equal(parseConfig(testEnv({ ERROR_TRACKING_DSN: '  ' })).config.errorTrackingDsn, undefined);
    assert.equal(
      parseConfig(testEnv({ ERROR_TRACKING_DSN: 'https://abc@errors.example.com/path/17' })).config
        .errorTrackingDsn,
      'https://abc@errors.example.com/path/17',
    );
  });

  it('reports an unhandled 5xx with no registered secret, credential, cookie or body in the envelope', async () => {
    assert.equal(errorReportsEnabled(), true);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/test-failure?token=query-secret-value',
      headers: {
        ...user.auth,
        cookie: `paddock_session=${COOKIE_VALUE}`,
        'content-type': 'application/json',
      },
      payload: JSON.stringify({ field: BODY_VALUE }),
    });
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), { error: 'internal_error', message: 'internal error' });
    await waitForEnvelopes(1);
    const received = envelopes();
    assert.equal(received.length, 1, 'one envelope for one error');
    const { raw, items } = received[0]!;
    const [header, itemHeader, payload] = items.map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(typeof (header as { event_id?: unknown }).event_id, 'string');
    assert.equal((itemHeader as { type?: string }).type, 'event');
    const event = payload as {
      exception: { values: { type: string; value: string }[] };
      tags?: Record<string, string>;
      request?: unknown;
    };
    const exception = event.exception.values.at(-1)!;
    assert.equal(exception.type, 'Error');
    // The message is still there, every secret in it replaced.
    assert.equal(
      exception.value,
      `the work failed with ${REDACTION_MARKER} for Bearer ${SCRUBBED} on ${SCRUBBED}`,
    );
    assert.equal(event.tags?.['route'], '/api/test-failure');
    for (const value of [
      SECRET,
      user.apiKey,
      SANDBOX_TOKEN,
      COOKIE_VALUE,
      BODY_VALUE,
      'query-secret-value',
    ]) {
      assert.ok(!raw.includes(value), `the envelope holds ${value}`);
    }
  });

  it('reports a failed job, scrubbed the same way', async () => {
    const before = envelopes().length;
    const tasks = observedTasks(
      {
        'test-job': async () => {
          throw new Error(`job failed near ${SECRET} and pdk_${'x'.repeat(40)}`);
        },
      },
      telemetry,
    );
    // biome-ignore lint/suspicious/noExplicitAny: the job helpers are not used by this task
    await assert.rejects(Promise.resolve(tasks['test-job']!({}, {} as any)), /job failed/);
    await waitForEnvelopes(before + 1);
    const raw = envelopes()[before]?.raw ?? '';
    assert.match(raw, /job failed near/);
    assert.match(raw, /"job":"test-job"/);
    assert.ok(!raw.includes(SECRET), 'the job report holds the registered secret');
    assert.ok(!raw.includes(`pdk_${'x'.repeat(40)}`), 'the job report holds an API key');
  });

  it('scrubs a reported error whose secret is registered after the report started', async () => {
    const before = envelopes().length;
    const late = `late-secret-${randomBytes(6).toString('hex')}`;
    registry.register(late);
    reportError(new Error(`late: ${late}`), { tags: { where: 'test' } });
    await waitForEnvelopes(before + 1);
    const raw = envelopes()[before]?.raw ?? '';
    assert.match(raw, /late: \[REDACTED\]/);
    assert.ok(!raw.includes(late));
  });
});
