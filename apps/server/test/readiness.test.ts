import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { appOnDatabase, type ScratchPostgres, startScratchPostgres } from './helpers/scratch.ts';

// A database of its own that the test stops and starts again under a running app.
describe('readiness while the database goes down and comes back', () => {
  let scratch: ScratchPostgres;
  before(async () => {
    scratch = await startScratchPostgres({ postgresFlags: ['-c', 'fsync=off'] });
  });
  after(async () => {
    await scratch.remove();
  });

  it('answers 503 quickly while down, /health stays 200, and recovers without a restart', async () => {
    const { app, close } = await appOnDatabase(scratch.pg.url, {}, 4);
    try {
      assert.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200);

      await scratch.pg.stop();
      const started = performance.now();
      const down = await app.inject({ method: 'GET', url: '/health/ready' });
      const elapsed = performance.now() - started;
      assert.equal(down.statusCode, 503);
      assert.deepEqual(down.json(), { checks: { database: 'error' }, status: 'error' });
      assert.ok(elapsed < 5000, `readiness took ${elapsed} ms while the database was down`);
      assert.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200);
      // A request that needs the database answers 503 with Retry-After, not 500.
      const login = await app.inject({
        method: 'POST',
        url: '/api/auth/login',
        payload: { email: 'someone@example.com', password: 'a long passphrase' },
      });
      assert.equal(login.statusCode, 503, login.body);
      assert.equal(login.json().error, 'service_unavailable');
      assert.equal(login.headers['retry-after'], '1');

      // The same cluster comes back on the same address; the app's pool reconnects by itself.
      scratch.pg = await startEmbeddedPostgres({
        dataDir: scratch.dir,
        port: scratch.pg.port,
        postgresFlags: ['-c', 'fsync=off'],
      });
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = (await app.inject({ method: 'GET', url: '/health/ready' })).statusCode;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(status, 200);
    } finally {
      await close();
    }
  });
});
