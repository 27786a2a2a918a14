import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { killSandboxInitsUnder, sandboxInitsUnder } from './leftovers.ts';

// Stand-ins for sandbox inits (src/runtime/namespaces.ts), without namespaces: the same command line
// (`… sh -c 'eval "$SBX_INIT"' sandbox-init`) and SBX_MERGED, an outer process (unshare's place) whose child
// has that command line too (pid 1's place). The child waits with a shell builtin (a read of the pipe this
// test holds), so killing both leaves nothing behind.
const roots = [0, 1].map(() => mkdtempSync(path.join(os.tmpdir(), 'leftovers-test-')));
const pids: number[] = [];
after(() => {
  for (const pid of pids.reverse()) {
    try {
      // Only a stand-in still running (a pid of one killed in the test may have been reused).
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').endsWith('sandbox-init\0'))
        process.kill(pid, 'SIGKILL');
    } catch {}
  }
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function fakeInit(dataDir: string, sandbox: string): ChildProcess {
  const inner = `if [ -z "\${INNER:-}" ]; then INNER=1 /bin/sh -c 'eval "$SBX_INIT"' sandbox-init; else read -r _; fi; :`;
  const child = spawn('/bin/sh', ['-c', 'eval "$SBX_INIT"', 'sandbox-init'], {
    stdio: ['pipe', 'ignore', 'ignore'],
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      SBX_INIT: inner,
      SBX_MERGED: path.join(dataDir, 'tenants', 't', 'sandboxes', sandbox, 'merged'),
    },
  });
  pids.push(child.pid!);
  return child;
}

/** The child of `pid` with the init's command line, once it runs. */
async function innerOf(pid: number): Promise<number> {
  for (let i = 0; i < 250; i++) {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/);
    for (const c of children.filter(Boolean)) {
      try {
        if (readFileSync(`/proc/${c}/cmdline`, 'utf8').endsWith('sandbox-init\0')) {
          pids.push(Number(c));
          return Number(c);
        }
      } catch {}
    }
    await sleep(20);
  }
  throw new Error(`no inner process of ${pid}`);
}

describe('sandbox inits found from /proc (leftovers.ts)', () => {
  it('finds the inits whose sandbox lies under a directory, whatever the records say, and kills only those', async () => {
    const [mine, other] = roots as [string, string];
    const a = fakeInit(path.join(mine, 'sandboxd-test-a'), 'sb-a');
    const b = fakeInit(other, 'sb-b');
    const innerA = await innerOf(a.pid!);
    const innerB = await innerOf(b.pid!);

    const found = sandboxInitsUnder(mine);
    assert.deepEqual(
      found.map(({ pid, pids, sandboxDir }) => ({ pid, pids, sandboxDir })),
      [
        {
          pid: innerA,
          pids: [a.pid, innerA],
          sandboxDir: path.join(mine, 'sandboxd-test-a', 'tenants', 't', 'sandboxes', 'sb-a'),
        },
      ],
    );
    assert.ok(Math.abs(found[0]!.startedAt.getTime() - Date.now()) < 60_000);
    // A directory that merely starts with the same characters is another one.
    assert.deepEqual(sandboxInitsUnder(`${mine}/sandboxd-test`), []);

    const killed = await killSandboxInitsUnder(mine);
    assert.deepEqual(
      killed.map(({ pid }) => pid),
      [innerA],
    );
    assert.deepEqual(sandboxInitsUnder(mine), []);
    assert.deepEqual(
      sandboxInitsUnder(other).map(({ pid }) => pid),
      [innerB],
      "another directory's init still runs",
    );
  });
});
