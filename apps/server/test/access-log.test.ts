// Issue 37, finding 6: the readable log (npm start's terminal) is not an access log. Ordinary
// requests, a console's polls, write nothing at info; a request that failed on the server or was
// slow writes one short line; the JSON format keeps a line per request for log shippers; a
// warning's message is in colour, not only its label. The real app on a real database.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { SLOW_REQUEST_MS } from '../src/http/access-log.ts';
import { createLogger } from '../src/observability/logger.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';

const routes = (app: TestApp['app']) => {
  app.get('/test/boom', async () => {
    throw new Error('the handler broke');
  });
  app.get('/test/slow', async () => {
    await new Promise((r) => setTimeout(r, SLOW_REQUEST_MS + 50));
    return { ok: true };
  });
};

/** The console's ordinary traffic: health, its session, pages it polls, a 404 and a 401. */
async function ordinaryRequests(t: TestApp): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await t.app.inject({ method: 'GET', url: '/health' });
    await t.app.inject({ method: 'GET', url: '/api/me' });
    await t.app.inject({ method: 'GET', url: '/api/conversations?limit=20' });
    await t.app.inject({ method: 'GET', url: '/api/no-such-route' });
  }
}

let db: TestDatabase;
before(async () => {
  db = await createTestDatabase();
});
after(async () => {
  await db.drop();
});

describe('the readable log keeps requests out of the way (issue 37, finding 6)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ database: db, logFormat: 'pretty', env: { LOG_LEVEL: 'info' }, routes });
  });
  after(async () => {
    await t.close();
  });

  it('writes no line for ordinary requests, 4xx included', async () => {
    const from = t.logs.length;
    await ordinaryRequests(t);
    const lines = t.logs.slice(from).join('');
    assert.equal(lines, '', `access lines in the readable log:\n${lines}`);
  });

  it('writes one short line for a request that failed on the server, and one for a slow one', async () => {
    let from = t.logs.length;
    const boom = await t.app.inject({ method: 'GET', url: '/test/boom?token=s3cr3t' });
    assert.equal(boom.statusCode, 500);
    const access = t.logs
      .slice(from)
      .join('')
      .split('\n')
      .filter((l) => l.includes('GET /test/boom'));
    assert.equal(access.length, 1, t.logs.slice(from).join(''));
    assert.match(access[0]!, /ERROR: GET \/test\/boom\?token=\[redacted\] 500 \d+ ms/);
    assert.ok(access[0]!.length < 200, access[0]);

    from = t.logs.length;
    await t.app.inject({ method: 'GET', url: '/test/slow' });
    const slow = t.logs.slice(from).join('').trim().split('\n');
    assert.equal(slow.length, 1, slow.join('\n'));
    assert.match(slow[0]!, /WARN: GET \/test\/slow 200 \d{4,} ms \(slow\)/);
  });

  it('writes every request at debug', async () => {
    const d = await buildTestApp({ database: db, logFormat: 'pretty', env: { LOG_LEVEL: 'debug' } });
    try {
      await d.app.inject({ method: 'GET', url: '/api/no-such-route' });
      assert.match(d.logs.join(''), /DEBUG: GET \/api\/no-such-route 404 \d+ ms/);
    } finally {
      await d.close();
    }
  });
});

describe('the JSON log keeps a line per request', () => {
  it('logs incoming request and request completed at info for each', async () => {
    const t = await buildTestApp({ database: db, env: { LOG_LEVEL: 'info' } });
    try {
      await ordinaryRequests(t);
      const entries = t.logs.map((l) => JSON.parse(l) as { level: string; msg: string });
      const completed = entries.filter((e) => e.msg === 'request completed');
      assert.equal(completed.length, 40);
      assert.ok(completed.every((e) => e.level === 'info'));
      assert.equal(entries.filter((e) => e.msg === 'incoming request').length, 40);
    } finally {
      await t.close();
    }
  });
});

describe('a warning stands out in colour', () => {
  it('colours the message of a warning yellow and of an error red, an info one stays cyan', () => {
    let text = '';
    const destination = new Writable({
      write(chunk, _enc, done) {
        text += String(chunk);
        done();
      },
    });
    const logger = createLogger({ level: 'info', format: 'pretty', destination, colorize: true });
    logger.info('all is well');
    logger.warn('sandboxd is not reachable');
    logger.error('the database went away');
    const [info, warn, error] = text.trim().split('\n');
    const esc = String.fromCharCode(27);
    assert.ok(info?.includes(`${esc}[36mall is well`), info);
    assert.ok(warn?.includes(`${esc}[33msandboxd is not reachable`), warn);
    assert.ok(error?.includes(`${esc}[31mthe database went away`), error);
  });
});
