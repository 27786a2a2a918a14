/** One sandboxd per data directory (src/data-dir-lock.ts): the real daemon, started twice on one directory. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api } from './helpers.ts';

const running: TestSandboxd[] = [];
const dirs: string[] = [];
after(async () => {
  for (const d of running) await d.stop({ keepData: true }).catch(() => {});
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function start(dataDir: string, token?: string): Promise<TestSandboxd> {
  const d = await startTestSandboxd({ dataDir, ...(token ? { token } : {}) });
  running.push(d);
  return d;
}

describe('the data directory lock', () => {
  it('refuses a second daemon on a data directory in use, naming the first; takes it once the first stopped', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sandboxd-lock-'));
    dirs.push(dataDir);
    const first = await start(dataDir);
    await assert.rejects(
      startTestSandboxd({ dataDir }),
      new RegExp(`another sandboxd \\(pid ${first.pid}\\) is using the data directory ${dataDir}`),
    );
    // The first one is untouched by the attempt.
    assert.equal((await api(first, 'POST', '/v1/sandboxes', { name: 'still-mine' })).status, 201);
    await first.stop({ keepData: true });
    const second = await start(dataDir, first.token);
    assert.equal((await api(second, 'GET', '/v1/sandboxes/still-mine')).status, 200);
  });

  it('a daemon killed outright leaves nothing to clean up: the next one starts', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sandboxd-lock-'));
    dirs.push(dataDir);
    const killed = await start(dataDir);
    process.kill(killed.pid, 'SIGKILL');
    await killed.stop({ keepData: true });
    const next = await start(dataDir);
    assert.equal((await api(next, 'GET', '/v1/sandboxes')).status, 200);
  });
});
