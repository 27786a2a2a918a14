/**
 * sandboxd killed (SIGKILL) at the wrong moment: the next sandboxd on the data dir finishes what the first
 * left, it never revives or loses track of a sandbox (src/sandboxes.service.ts, invariants).
 *
 * The two moments are reproduced by the state a crash leaves on disk, since a SIGKILL cannot be aimed at them:
 * a record without the init that was already running (killed between spawning the init and recording it),
 * and a record marked `destroying` (killed in the middle of a destroy).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, sh, waitFor } from './helpers.ts';
import { sandboxInitsUnder } from './leftovers.ts';

let d: TestSandboxd;
let dataDir = '';

before(async () => {
  d = await startTestSandboxd();
  dataDir = d.dataDir;
});
after(async () => {
  await d.stop();
});

function sandboxDir(name: string): string {
  const tenants = readdirSync(path.join(dataDir, 'tenants'));
  return path.join(dataDir, 'tenants', tenants[0]!, 'sandboxes', name);
}

function editRecord(name: string, edit: (rec: Record<string, unknown>) => void): void {
  const file = path.join(sandboxDir(name), 'sandbox.json');
  const rec = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  edit(rec);
  writeFileSync(file, JSON.stringify(rec));
}

async function crash(): Promise<void> {
  const exited = new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      try {
        process.kill(d.pid, 0);
      } catch {
        clearInterval(poll);
        resolve();
      }
    }, 10);
  });
  process.kill(d.pid, 'SIGKILL');
  await exited;
  await d.stop({ keepData: true });
}

async function restart(): Promise<void> {
  d = await startTestSandboxd({ dataDir, token: d.token });
}

/** The pids of the running inits of one sandbox. */
function initsOf(name: string): number[] {
  const dir = sandboxDir(name);
  return sandboxInitsUnder(dataDir)
    .filter((i) => i.sandboxDir === dir)
    .flatMap((i) => i.pids);
}

describe('sandboxd restarted after a crash', () => {
  it('kills an init no record claims, and starts the sandbox again on demand', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'orphan' })).status, 201);
    assert.equal((await sh(d, 'orphan', 'echo up')).stdout, 'up\n');
    const before = initsOf('orphan');
    assert.ok(before.length > 0, 'the sandbox runs an init');
    await crash();
    // As a sandboxd killed between spawning the init and recording it leaves the record.
    editRecord('orphan', (rec) => {
      rec['init'] = null;
    });
    await restart();
    await waitFor(
      () => initsOf('orphan').every((pid) => !before.includes(pid)),
      'the unclaimed init to be killed',
    );
    assert.ok(
      d.logs().some((l) => l.includes('killing a sandbox init no record claims')),
      'the kill is logged',
    );
    const again = await sh(d, 'orphan', 'echo again');
    assert.equal(again.stdout, 'again\n');
    assert.equal(sandboxInitsUnder(dataDir).filter((i) => i.sandboxDir === sandboxDir('orphan')).length, 1);
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/orphan')).status < 300, true);
  });

  it('finishes a destroy a crash interrupted: the sandbox stays gone, its name is free again', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'half' })).status, 201);
    assert.equal((await sh(d, 'half', 'echo kept > old.txt && echo ok')).stdout, 'ok\n');
    const dir = sandboxDir('half');
    await crash();
    // As a sandboxd killed in the middle of the destroy leaves the record (marked before anything goes).
    editRecord('half', (rec) => {
      rec['destroying'] = true;
    });
    await restart();
    assert.equal((await api(d, 'GET', '/v1/sandboxes/half')).status, 404);
    const listed = (await api(d, 'GET', '/v1/sandboxes')).json['sandboxes'] as { name: string }[];
    assert.ok(!listed.some((s) => s.name === 'half'), 'not listed');
    await waitFor(() => !existsSync(dir), 'the sandbox directory to be removed');
    assert.deepEqual(initsOf('half'), [], 'no init of it runs');
    // The line is written once the teardown has resolved, which can be a moment after the directory went.
    await waitFor(
      () => d.logs().some((l) => l.includes('finished an interrupted sandbox destroy')),
      'the finished destroy to be logged',
    );
    // The name is free, and the new sandbox starts empty.
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'half' })).status, 201);
    assert.equal((await sh(d, 'half', 'ls old.txt 2>&1 || echo gone')).stdout.trim().endsWith('gone'), true);
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/half')).status < 300, true);
  });
});
