// A stopped sandboxd leaves no empty cgroup directory of its own behind (runtime/cgroups.ts
// release()): its per-daemon parent goes when its sandboxes are gone, and stays while a sandbox
// that outlives the daemon (they survive a restart) still has its cgroup in it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { daemonCgroupParents, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, sh } from './helpers.ts';

/** Stops the daemon with SIGTERM (its own shutdown), keeping the data dir for the harness. */
async function terminate(d: TestSandboxd): Promise<void> {
  process.kill(d.pid, 'SIGTERM');
  for (let i = 0; i < 100 && existsSync(`/proc/${d.pid}`); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(!existsSync(`/proc/${d.pid}`), 'sandboxd stopped');
}

const cgroupsIn = (d: TestSandboxd) => d.logs().find((l) => l.includes('cgroups: using')) !== undefined;

describe('sandboxd cgroups on stop', () => {
  it('removes its cgroup parent when no sandbox is left, and keeps it for a sandbox that outlives it', async (t) => {
    const d = await startTestSandboxd();
    try {
      // Without a writable cgroup tree there is nothing to release, and this test would assert nothing.
      assert.ok(cgroupsIn(d), `sandboxd found no writable cgroup tree here: ${d.logs().join('\n')}`);
      assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'cg-gone' })).status, 201);
      assert.equal((await sh(d, 'cg-gone', 'true')).exitCode, 0);
      const parents = daemonCgroupParents(d.dataDir);
      assert.ok(parents.length > 0, 'the daemon made its cgroup parent');
      assert.equal((await api(d, 'DELETE', '/v1/sandboxes/cg-gone')).status, 204);
      await terminate(d);
      assert.deepEqual(
        parents.filter((p) => existsSync(p)),
        [],
        'no cgroup directory of the daemon is left',
      );
    } finally {
      await d.stop();
    }
    await t.test('a sandbox still there keeps it', async () => {
      const kept = await startTestSandboxd();
      try {
        assert.equal((await api(kept, 'POST', '/v1/sandboxes', { name: 'cg-kept' })).status, 201);
        assert.equal((await sh(kept, 'cg-kept', 'true')).exitCode, 0);
        const parents = daemonCgroupParents(kept.dataDir);
        await terminate(kept);
        assert.deepEqual(
          parents.filter((p) => !existsSync(p)),
          [],
          "the running sandbox's cgroups stay in place",
        );
      } finally {
        await kept.stop();
      }
    });
  });
});
