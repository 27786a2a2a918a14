/**
 * The holders of a sandbox's user namespaces run the host's programs before the init switches roots
 * (src/runtime/init.sh, await_holder), however slow they are.
 *
 * Rootless, the init used to leave its two holders running beside its mounts and switch roots without them:
 * a holder still in its host programs at the switch looked the next ones up in the sandbox's root (run with
 * the init's identity), and an unshare(2) landing between pivot_root and the umount after it failed with
 * EPERM. On a loaded host that failed sandbox starts (503 "holder did not start"). Here the holders' first
 * program, `env`, is made slower than the init's whole start, in both daemon modes: a wrapper, in the upper
 * layer of an overlay mounted over /usr in the daemon's mount namespace only (a bind mount below /usr would
 * not do: a rootless overlay refuses a lower layer with mounts inside it).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, sh } from './helpers.ts';
import { daemonModes } from './modes.ts';

const DELAY_S = 1;

for (const mode of daemonModes()) {
  describe(`a sandbox whose user namespace holders are slow to start (${mode.name})`, () => {
    let d: TestSandboxd;
    let dir = '';
    let trace = '';

    before(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'paddock-slow-env-'));
      chmodSync(dir, 0o755);
      copyFileSync('/usr/bin/env', path.join(dir, 'env'));
      trace = path.join(dir, 'trace');
      writeFileSync(trace, '');
      chmodSync(trace, 0o666);
      // The holders' `env` (init.sh): sleeps, then notes that it still sees the host's root and runs the
      // host's env (by a path only the host has).
      const upper = path.join(dir, 'upper');
      mkdirSync(path.join(upper, 'bin'), { recursive: true });
      mkdirSync(path.join(dir, 'work'));
      const wrapper = path.join(upper, 'bin', 'env');
      writeFileSync(
        wrapper,
        `#!/bin/sh\n/bin/sleep ${DELAY_S}\necho host >> ${trace}\nexec ${path.join(dir, 'env')} "$@"\n`,
      );
      chmodSync(wrapper, 0o755);
      d = await startTestSandboxd({
        ...(mode.user ? { user: mode.user } : {}),
        prepare: `mount -t overlay overlay -o lowerdir=/usr,upperdir=${upper},workdir=${path.join(dir, 'work')} /usr`,
      });
    });
    after(async () => {
      await d?.stop();
      if (!dir) return;
      // Not root: the overlay's work dir (mode 000, made by the kernel) must be made accessible first.
      execFileSync('chmod', ['-R', 'u+rwx', '--', dir], { stdio: 'ignore' });
      rmSync(dir, { recursive: true, force: true });
    });

    it('starts once every holder has run its host programs, and runs commands as the sandbox user', async () => {
      assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'slow' })).status, 201);
      const r = await sh(d, 'slow', 'id -u; echo ok');
      assert.equal(r.stdout, '1000\nok\n', `exit ${r.exitCode}: ${r.stderr}`);
      // Rootless has two holders (the sandbox user's namespace, root execs' namespace); root mode one.
      const holders = mode.name === 'rootless' ? 2 : 1;
      assert.equal(readFileSync(trace, 'utf8'), 'host\n'.repeat(holders));
      const started = d
        .logs()
        .map((l) => JSON.parse(l) as { msg?: string; sandbox?: string; ms?: number })
        .find((l) => l.msg === 'sandbox started' && l.sandbox === 'slow');
      assert.ok(
        (started?.ms ?? 0) >= DELAY_S * 1000,
        `the init switched roots before its holders were ready (${started?.ms} ms)`,
      );
      if (mode.name === 'rootless') {
        const root = await sh(d, 'slow', 'id -u', { user: 'root' });
        assert.equal(root.stdout, '0\n', root.stderr);
      }
    });
  });
}
