// The `packages` stage through the provisioner, against a real sandboxd and the real Debian
// archive and npm registry (the test FAILS naming them when they cannot be reached; never
// skipped). apt runs as the sandbox's root, npm as the sandbox user (conversations/provisioning/packages.ts);
// their output streams to the conversation's log. pip with a fake index is covered at the
// sandboxd level (apps/sandboxd/test/packages.test.ts), through the same commands.
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ProvisionError } from '../src/conversations/contracts.ts';
import { packageCommands } from '../src/conversations/provisioning/packages.ts';
import {
  createEnvironment,
  newConversation,
  type ProvisionHarness,
  provisionerFor,
  sandboxRow,
  sh,
  stagesOf,
  startProvisionHarness,
} from './helpers/provisioning.ts';

const UPSTREAMS = [
  { name: 'the Debian archive', url: 'http://deb.debian.org/debian/dists/bookworm/InRelease' },
  { name: 'the npm registry', url: 'https://registry.npmjs.org/cowsay' },
];

let h: ProvisionHarness;
before(async () => {
  const ips = new Set<string>();
  for (const u of UPSTREAMS) {
    const res = await fetch(u.url, { method: 'HEAD', signal: AbortSignal.timeout(20_000) }).catch(
      (err: Error) => err,
    );
    assert.ok(
      !(res instanceof Error) && res.status < 500,
      `${u.name} (${u.url}) cannot be reached from this machine`,
    );
    // An intercepting mirror may answer from a private range, which sandboxd opens only when listed.
    for (const a of await lookup(new URL(u.url).hostname, { all: true }))
      if (isIP(a.address) === 4) ips.add(a.address);
  }
  h = await startProvisionHarness({
    sandboxd: ips.size > 0 ? { env: { SANDBOXD_EGRESS_ALLOW_CIDRS: [...ips].join(',') } } : {},
  });
});
after(async () => {
  await h?.close();
});

// As an ordinary user sandboxd is rootless: apt cannot change the host's /usr there
// (docs/sandboxd.md, "System packages"), so the stage fails naming apt; npm installs as in root mode.
const rootless = process.getuid?.() !== 0;

describe('packages stage', () => {
  test('apt (as root) and npm install; output streams to the log; the sandbox user runs them', async () => {
    if (rootless) {
      const aptEnv = await createEnvironment(h, { packages: { apt: 'hello' } });
      const a = await newConversation(h, { environmentId: aptEnv });
      await assert.rejects(
        provisionerFor(h, { packagePlanner: packageCommands }).provision(a.input),
        (err: unknown) => {
          assert.ok(err instanceof ProvisionError);
          assert.equal(err.stage, 'packages');
          assert.match(err.message, /^apt failed/);
          return true;
        },
      );
      const npmEnv = await createEnvironment(h, { packages: { npm: 'cowsay' } });
      const n = await newConversation(h, { environmentId: npmEnv });
      await provisionerFor(h, { packagePlanner: packageCommands }).provision(n.input);
      assert.deepEqual(stagesOf(n.writer.rows), [
        'provision:started',
        'provision:done',
        'packages:started',
        'packages:done',
      ]);
      const out = await sh(h.client, n.input.sandboxName, 'id -un; cowsay paddock');
      assert.match(out, /^sandbox\n/);
      assert.match(out, /< paddock >/);
      await h.client.destroy(n.input.sandboxName);
      return;
    }
    const environmentId = await createEnvironment(h, { packages: { apt: 'hello', npm: 'cowsay' } });
    const c = await newConversation(h, { environmentId });
    await provisionerFor(h, { packagePlanner: packageCommands }).provision(c.input);
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'packages:started',
      'packages:done',
    ]);
    assert.match(c.writer.text(), /Setting up hello/);
    const name = c.input.sandboxName;
    const out = await sh(h.client, name, 'id -un; hello; cowsay paddock');
    assert.match(out, /^sandbox\nHello, world!\n/);
    assert.match(out, /< paddock >/);
    assert.equal((await sandboxRow(h, c.input.sandboxId)).status, 'ready');
    await h.client.destroy(name);
  });

  test('a limited environment installs its packages before its policy applies, then the policy holds', async () => {
    const environmentId = await createEnvironment(h, {
      packages: { npm: 'cowsay' },
      networking_type: 'limited',
      networking_config: { allowed_hosts: [] },
    });
    const c = await newConversation(h, { environmentId });
    await provisionerFor(h, { packagePlanner: packageCommands }).provision(c.input);
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'packages:started',
      'packages:done',
      'network:started',
      'network:done',
    ]);
    const name = c.input.sandboxName;
    assert.match(await sh(h.client, name, 'cowsay paddock'), /< paddock >/);
    // The registry is not on the allowlist: later installs (setup script, the agent) are denied.
    const later = await sh(h.client, name, 'npm view cowsay version 2>&1 || true');
    assert.match(later, /denied by the sandbox network policy/);
    await h.client.destroy(name);
  });

  test('an install the egress proxy refuses fails naming the setting that opens the way', async () => {
    // A registry on a loopback address: the proxy refuses it as not public, policy or not.
    const environmentId = await createEnvironment(h, {
      packages: { npm: 'cowsay' },
      env_vars: { NPM_CONFIG_REGISTRY: 'http://127.0.0.2:9/', NPM_CONFIG_FETCH_RETRIES: '0' },
    });
    const c = await newConversation(h, { environmentId });
    await assert.rejects(
      provisionerFor(h, { packagePlanner: packageCommands }).provision(c.input),
      (err: unknown) => {
        assert.ok(err instanceof ProvisionError);
        assert.equal(err.stage, 'packages');
        assert.match(err.message, /^npm failed \(exit \d+\): .*SANDBOXD_EGRESS_ALLOW_CIDRS/);
        assert.doesNotMatch(err.message, /127\.0\.0\.2/);
        return true;
      },
    );
    assert.match(c.writer.text(), /not a public address/);
  });

  test('a package that does not exist fails the packages stage with the manager named; sandbox destroyed', async () => {
    const environmentId = await createEnvironment(h, { packages: { npm: 'paddock-no-such-package-7f3a9c' } });
    const c = await newConversation(h, { environmentId });
    await assert.rejects(
      provisionerFor(h, { packagePlanner: packageCommands }).provision(c.input),
      (err: unknown) => {
        assert.ok(err instanceof ProvisionError);
        assert.equal(err.stage, 'packages');
        assert.match(err.message, /^npm failed \(exit \d+\)/);
        return true;
      },
    );
    assert.match(c.writer.text(), /404|E404|Not Found/i);
    assert.equal(await h.client.get(c.input.sandboxName), null);
    assert.equal((await sandboxRow(h, c.input.sandboxId)).status, 'failed');
  });
});
