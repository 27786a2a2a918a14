// The `runtime` provisioning stage (conversations/provisioning/runtime-probe.ts) against a real sandboxd: the
// probe passes on the backend's runtime layer; waits for a layer that is installing; installs the
// pinned CLI with npm from the real registry when the backend has no layer; a failing probe fails
// provisioning with a clear reason.
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { processStartTime } from '../../sandboxd/src/runtime/namespaces.ts';
import { sharedLayerHash } from '../../sandboxd/test/runtime-layer-cache.ts';
import { ProvisionError, type RuntimeAdapter } from '../src/conversations/contracts.ts';
import { DEFAULT_RUNTIME_PROBE_TIMEOUTS } from '../src/conversations/provisioning/runtime-probe.ts';
import { pinnedCli } from '../src/conversations/turns/runtimes/pinned-cli.ts';
import {
  newConversation,
  type ProvisionHarness,
  provisionerFor,
  sandboxRow,
  stagesOf,
  startProvisionHarness,
  testAdapter,
} from './helpers/provisioning.ts';

const withCli = (cli: RuntimeAdapter['cli']): RuntimeAdapter => ({ ...testAdapter, ...(cli ? { cli } : {}) });

async function waitFor(fn: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('runtime stage on the backend’s runtime layer', () => {
  let h: ProvisionHarness;
  before(async () => {
    h = await startProvisionHarness({ sandboxd: { runtimeLayer: true } });
  });
  after(async () => {
    await h?.close();
  });

  test('the pinned claude answers --version: stage started → done, its version in the log', async () => {
    const c = await newConversation(h);
    const provisioned = await provisionerFor(h).provision({
      ...c.input,
      adapter: withCli(pinnedCli('claude')),
    });
    assert.equal(provisioned.path, 'cold');
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'runtime:started',
      'runtime:done',
    ]);
    const done = c.writer.rows.find((r) => r.stage?.stage === 'runtime' && r.stage.state === 'done');
    assert.ok((done?.stage?.durationMs ?? -1) >= 0);
    assert.match(c.writer.text(), new RegExp(pinnedCli('claude').version.replaceAll('.', '\\.')));
    assert.equal((await sandboxRow(h, c.input.sandboxId))?.status, 'ready');
  });

  test('a later provisioning does not start a CLI of the layer again, and its log says nothing of it', async () => {
    const p = provisionerFor(h);
    const first = await newConversation(h);
    await p.provision({ ...first.input, adapter: withCli(pinnedCli('claude')) });
    assert.doesNotMatch(first.writer.text(), /answered --version before/);
    const second = await newConversation(h);
    await p.provision({ ...second.input, adapter: withCli(pinnedCli('claude')) });
    assert.deepEqual(stagesOf(second.writer.rows), [
      'provision:started',
      'provision:done',
      'runtime:started',
      'runtime:done',
    ]);
    // No internal line ("answered --version before …") in the log a person reads.
    assert.equal(second.writer.text(), '');
  });

  test('an adapter without a CLI (a test double) has no runtime stage', async () => {
    const c = await newConversation(h);
    await provisionerFor(h).provision(c.input);
    assert.deepEqual(stagesOf(c.writer.rows), ['provision:started', 'provision:done']);
  });
});

describe('runtime stage while the backend’s layer is installing', () => {
  let h: ProvisionHarness;
  let layers: string;
  const partial = () => path.join(layers, `${sharedLayerHash()}.partial`);
  before(async () => {
    layers = mkdtempSync(path.join(os.tmpdir(), 'paddock-layers-'));
    // Another installer (this process) holds the layer's partial: the daemon reports `installing`.
    mkdirSync(partial());
    writeFileSync(
      path.join(partial(), 'owner.json'),
      JSON.stringify({ pid: process.pid, start: processStartTime(process.pid) }),
    );
    h = await startProvisionHarness({ sandboxd: { runtimeLayer: layers } });
  });
  after(async () => {
    await h?.close();
    rmSync(layers, { recursive: true, force: true });
  });

  test('waits with a message in the log, then passes once the layer is ready', async () => {
    const c = await newConversation(h);
    const cli = { package: 'paddock-test-cli', version: '1.0.0', bin: 'paddock-test-cli' };
    const p = provisionerFor(h, { runtimeTimeouts: { pollMs: 100 } });
    const provisioning = p.provision({
      ...c.input,
      adapter: withCli(cli),
    });
    await waitFor(() => c.writer.text().includes('waiting for the runtime layer (installing'), 'the wait');
    assert.ok(!stagesOf(c.writer.rows).includes('runtime:done'));
    // The installer finishes: a layer with the CLI, renamed into place.
    mkdirSync(path.join(partial(), 'bin'));
    // Each run answers with a fresh nonce: a second run would show a second one.
    writeFileSync(
      path.join(partial(), 'bin', cli.bin),
      '#!/bin/sh\necho "paddock-test-cli 1.0.0 run $(cat /proc/sys/kernel/random/uuid)"\n',
      { mode: 0o755 },
    );
    rmSync(path.join(partial(), 'owner.json'));
    renameSync(partial(), path.join(layers, sharedLayerHash()));
    await provisioning;
    assert.deepEqual(stagesOf(c.writer.rows).slice(-2), ['runtime:started', 'runtime:done']);
    const answer = /paddock-test-cli 1\.0\.0 run [0-9a-f-]{36}/.exec(c.writer.text())?.[0];
    assert.ok(answer, c.writer.text());
    // The same provisioner again: the CLI is not started (no second answer), and nothing it printed
    // before is repeated (that ran with another conversation's env).
    const again = await newConversation(h);
    await p.provision({ ...again.input, adapter: withCli(cli) });
    assert.deepEqual(stagesOf(again.writer.rows).slice(-2), ['runtime:started', 'runtime:done']);
    assert.equal(again.writer.text(), '');
  });

  test('a probe that does not answer in time fails provisioning (spec rule 2: client-side, 30–120 s)', async () => {
    const { probeMs } = DEFAULT_RUNTIME_PROBE_TIMEOUTS;
    assert.ok(probeMs >= 30_000 && probeMs <= 120_000, `the default probe timeout ${probeMs} ms`);
    // A CLI on the layer (placed there by the test above) whose --version never answers.
    const bin = 'paddock-slow-cli';
    writeFileSync(path.join(layers, sharedLayerHash(), 'bin', bin), '#!/bin/sh\nexec sleep 300\n', {
      mode: 0o755,
    });
    const c = await newConversation(h);
    const err = await provisionerFor(h, { runtimeTimeouts: { probeMs: 1000 } })
      .provision({ ...c.input, adapter: withCli({ package: bin, version: '1.0.0', bin }) })
      .catch((e: unknown) => e);
    assert.ok(err instanceof ProvisionError);
    assert.equal(err.stage, 'runtime');
    assert.equal(err.message, `${bin} --version did not answer within 1 s`);
    assert.deepEqual(stagesOf(c.writer.rows).slice(-1), ['runtime:failed']);
    assert.equal(await h.client.get(c.input.sandboxName), null);
  });
});

describe('runtime stage on a backend without a runtime layer', () => {
  let h: ProvisionHarness;
  before(async () => {
    // The in-sandbox install reaches the real npm registry (through the sandbox's egress proxy).
    const url = 'https://registry.npmjs.org/cowsay';
    const res = await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(20_000) }).catch(
      (e: Error) => e,
    );
    assert.ok(!(res instanceof Error) && res.status < 500, `the npm registry (${url}) cannot be reached`);
    const ips = (await lookup('registry.npmjs.org', { all: true }))
      .filter((a) => isIP(a.address) === 4)
      .map((a) => a.address);
    h = await startProvisionHarness({
      sandboxd: ips.length > 0 ? { env: { SANDBOXD_EGRESS_ALLOW_CIDRS: ips.join(',') } } : {},
    });
  });
  after(async () => {
    await h?.close();
  });

  test('a missing CLI is installed with npm as the sandbox user (output in the log), then probed', async () => {
    const c = await newConversation(h);
    const cli = { package: 'cowsay', version: '1.6.0', bin: 'cowsay' };
    await provisionerFor(h).provision({ ...c.input, adapter: withCli(cli) });
    assert.deepEqual(stagesOf(c.writer.rows).slice(-2), ['runtime:started', 'runtime:done']);
    const log = c.writer.text();
    assert.match(log, /cowsay is not in the sandbox; installing cowsay@1\.6\.0/);
    assert.match(log, /added \d+ packages/, 'npm output streamed to the log');
    assert.match(log, /1\.6\.0\s*$/, 'then the probe answered with the version');
    assert.equal((await sandboxRow(h, c.input.sandboxId))?.status, 'ready');
  });

  test('a CLI whose --version fails fails provisioning with the reason; the sandbox is destroyed', async () => {
    const c = await newConversation(h);
    const err = await provisionerFor(h)
      .provision({ ...c.input, adapter: withCli({ package: 'x', version: '1.0.0', bin: 'false' }) })
      .catch((e: unknown) => e);
    assert.ok(err instanceof ProvisionError);
    assert.equal(err.stage, 'runtime');
    assert.equal(err.message, "false --version failed (exit 1); its output is in the conversation's log");
    assert.deepEqual(stagesOf(c.writer.rows).slice(-1), ['runtime:failed']);
    const row = await sandboxRow(h, c.input.sandboxId);
    assert.equal(row?.status, 'failed');
    assert.equal(
      row?.reason,
      "runtime: false --version failed (exit 1); its output is in the conversation's log",
    );
    assert.equal(await h.client.get(c.input.sandboxName), null);
  });

  test('a CLI that cannot be installed fails provisioning naming the package', async () => {
    const c = await newConversation(h);
    const cli = { package: 'paddock-no-such-package-4f1c', version: '0.0.1', bin: 'paddock-no-such-cli' };
    const err = await provisionerFor(h)
      .provision({ ...c.input, adapter: withCli(cli) })
      .catch((e: unknown) => e);
    assert.ok(err instanceof ProvisionError);
    assert.equal(err.stage, 'runtime');
    assert.match(err.message, /^npm install of paddock-no-such-package-4f1c@0\.0\.1 failed \(exit \d+\)/);
    assert.match(c.writer.text(), /404|E404|not found/i, 'npm’s own output is in the log');
  });
});
