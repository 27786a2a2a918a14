// The ownership connection (owner.ts) is one pg client shared by every caller of this process:
// concurrent acquires, releases and lock calls (the servers ending together on shutdown, a
// command next to the orphan sweep) must reach it one statement at a time. pg queues them
// itself but prints a DeprecationWarning for it ("Calling client.query() when the client is
// already executing a query"), which shutdown printed to the terminal (issue 37, finding 10).
// Its own file: node prints a deprecation once per process.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createOwnership } from '../src/conversations/engine/owner.ts';
import { createLogger } from '../src/observability/logger.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  await database?.drop();
});

describe('the ownership connection under concurrent callers', () => {
  it('runs every statement, one at a time, with no pg DeprecationWarning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    const ownership = createOwnership({
      pool: database.handle.pool,
      node: 'serial-test',
      logger: createLogger({ level: 'silent' }),
    });
    try {
      await ownership.open();
      const tenant = randomUUID();
      // Conversations that do not exist: each attempt takes and at once frees its lock.
      const attempts = await Promise.all(
        Array.from({ length: 20 }, () => ownership.tryAcquire(tenant, randomUUID())),
      );
      assert.deepEqual(attempts, Array(20).fill(null));
      const locks = await Promise.all(
        ['a', 'b', 'c', 'd'].map((n) => ownership.tryClusterLock(`serial-${n}`)),
      );
      assert.deepEqual(locks, [true, true, true, true]);
      await Promise.all(['a', 'b', 'c', 'd'].map((n) => ownership.releaseClusterLock(`serial-${n}`)));
      await Promise.all(['x', 'y'].map((ch) => ownership.listen(`serial_${ch}`, () => {})));
      // Let a warning emitted on the last tick reach the listener.
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(warnings, []);
    } finally {
      process.off('warning', onWarning);
      await ownership.close();
    }
  });
});
