/**
 * The holders of a sandbox's user namespaces run the host's programs before the init switches roots
 * (src/runtime/init.sh, await_holder), however slow they are; a holder that fails ends the start at once, and
 * its error reaches the caller.
 *
 * Rootless, the init used to leave its two holders running beside its mounts and switch roots without them:
 * a holder still in its host programs at the switch looked the next ones up in the sandbox's root (run with
 * the init's identity), and an unshare(2) landing between pivot_root and the umount after it failed with
 * EPERM. On a loaded host that failed sandbox starts (503 "holder did not start"). Here the holders' first
 * program, `env`, is made slower than the init's whole start (or fails), in both daemon modes: a wrapper, in the upper
 * layer of an overlay mounted over /usr in the daemon's mount namespace only (a bind mount below /usr would
 * not do: a rootless overlay refuses a lower layer with mounts inside it).
 */
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { removeTree, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, sh } from './helpers.ts';
import { type DaemonMode, daemonModes } from './modes.ts';

const DELAY_S = 1;

/**
 * A daemon whose holders' `env` (init.sh) is the shell script `body`, put in the upper layer of an overlay
 * over /usr in the daemon's mount namespace; `dir` also holds a copy of the host's env (`dir`/env).
 */
async function daemonWithEnv(mode: DaemonMode, dir: string, body: string): Promise<TestSandboxd> {
  const upper = path.join(dir, 'upper');
  mkdirSync(path.join(upper, 'bin'), { recursive: true });
  mkdirSync(path.join(dir, 'work'));
  const wrapper = path.join(upper, 'bin', 'env');
  writeFileSync(wrapper, `#!/bin/sh\n${body}`);
  chmodSync(wrapper, 0o755);
  return startTestSandboxd({
    ...(mode.user ? { user: mode.user } : {}),
    prepare: `mount -t overlay overlay -o lowerdir=/usr,upperdir=${upper},workdir=${path.join(dir, 'work')} /usr`,
  });
}

function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'paddock-slow-env-'));
  chmodSync(dir, 0o755);
  return dir;
}

for (const mode of daemonModes()) {
  describe(`a sandbox whose user namespace holders are slow to start, or fail (${mode.name})`, () => {
    let slow: TestSandboxd;
    let failing: TestSandboxd;
    const dirs: string[] = [];
    let trace = '';

    before(async () => {
      const dir = tempDir();
      dirs.push(dir);
      copyFileSync('/usr/bin/env', path.join(dir, 'env'));
      trace = path.join(dir, 'trace');
      writeFileSync(trace, '');
      chmodSync(trace, 0o666);
      // Sleeps, then notes that it still sees the host's root and runs the host's env (by a path only the
      // host has).
      slow = await daemonWithEnv(
        mode,
        dir,
        `/bin/sleep ${DELAY_S}\necho host >> ${trace}\nexec ${path.join(dir, 'env')} "$@"\n`,
      );
      const other = tempDir();
      dirs.push(other);
      failing = await daemonWithEnv(mode, other, 'echo "env refused by the test" >&2\nexit 3\n');
    });
    after(async () => {
      await slow?.stop();
      await failing?.stop();
      for (const dir of dirs) removeTree(dir);
    });

    it('starts once every holder has run its host programs, and runs commands as the sandbox user', async () => {
      const d = slow;
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

    it('fails the start at once when a holder fails, saying why', async () => {
      assert.equal((await api(failing, 'POST', '/v1/sandboxes', { name: 'broken' })).status, 201);
      const t0 = Date.now();
      const err = await sh(failing, 'broken', 'true').then(
        () => assert.fail('the exec ran without user namespace holders'),
        (e: unknown) => String(e),
      );
      assert.match(err, /503/);
      assert.match(err, /env refused by the test/);
      assert.match(err, /user namespace holder did not start/);
      // Not after the init's 10 s start timeout: the init itself reports the holder's end.
      assert.ok(Date.now() - t0 < 8000, `the failure took ${Date.now() - t0} ms`);
      assert.equal((await api(failing, 'DELETE', '/v1/sandboxes/broken')).status, 204);
    });
  });
}
