/**
 * The sandbox init's mounts against what the sandbox's root planted (issue 34: findings 2, 3 and 4), root and
 * rootless, each performed as the attack:
 * - a link planted at a mount point (or a directory above one) of the sandbox's tree, followed by a start of
 *   the sandbox: a daemon restart with the runtime layer turned on, a plain restart (the holder killed). The
 *   init mounts while / is still the host's; nothing outside the sandbox may change, the start fails naming
 *   the path;
 * - the idmapped host /usr (root mode): another host user's private file stays unreadable to the sandbox root;
 * - the runtime layer's mount shows no host path inside.
 */
import assert from 'node:assert/strict';
import {
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sandboxDir, sandboxLayer } from './attacks.ts';
import { processAlive, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, checkpointIdOf, ndjsonLines, sh, waitFor } from './helpers.ts';
import { daemonModes } from './modes.ts';
import { sharedLayerDir, sharedLayerHash } from './runtime-layer-cache.ts';

/** Every entry under `dir` (itself included) with its type, owner and mode: what "unchanged" compares. */
function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (p: string) => {
    const st = lstatSync(p);
    out.push(`${path.relative(dir, p) || '.'} ${st.mode.toString(8)} ${st.uid}:${st.gid}`);
    if (st.isDirectory()) for (const e of readdirSync(p).sort()) walk(path.join(p, e));
  };
  walk(dir);
  return out;
}

/** A relative link target that reaches host path `p` from any directory (enough `..` to pass /). */
function relativeTo(p: string): string {
  return `${'../'.repeat(24)}${p.slice(1)}`;
}

/**
 * Sends the sandbox's user-namespace holder SIGKILL, as the sandbox's root can: the sandbox stops (its init
 * ends), and the next exec starts it again.
 */
async function killHolder(d: TestSandboxd, name: string): Promise<void> {
  const rec = JSON.parse(readFileSync(path.join(sandboxDir(d, name), 'sandbox.json'), 'utf8')) as {
    init: { pid: number; holderPid: number } | null;
  };
  assert.ok(rec.init, `${name} runs`);
  process.kill(rec.init.holderPid, 'SIGKILL');
  const init = rec.init.pid;
  await waitFor(() => !processAlive(init), `the init of ${name} ends`);
}

/** The next exec of sandbox `name`, which starts it: null when it ran, else the error it was refused with. */
async function startError(d: TestSandboxd, name: string): Promise<Error | null> {
  return sh(d, name, 'true').then(
    () => null,
    (e: Error) => e,
  );
}

/** Asserts that a start failed with `reason` (a 503 naming the path inside the sandbox, no host path). */
function assertRefused(d: TestSandboxd, name: string, err: Error | null, reason: RegExp): void {
  assert.ok(err, `${name}: the start fails`);
  assert.match(err.message, /^exec refused: 503 /);
  assert.match(err.message, reason, name);
  assert.ok(!err.message.includes(d.dataDir), `${name}: no host path in the answer: ${err.message}`);
}

for (const mode of daemonModes()) {
  const as = mode.user ? { user: mode.user } : {};
  /** Hands a test directory to the daemon's user (rootless): a host directory that user could change. */
  const own = (p: string): string => {
    if (mode.user) chownSync(p, mode.user.uid, mode.user.gid);
    return p;
  };

  describe(`mount points the sandbox planted (${mode.name})`, () => {
    // A host directory (with a subdirectory and a file) each test's links point at, the daemon's user's in
    // rootless mode (the worst case there: a directory that user may change); `before0` what it held.
    let target: string;
    let before0: string[];
    const made: string[] = [];
    beforeEach(() => {
      target = own(mkdtempSync(path.join(os.tmpdir(), 'paddock-mount-target-')));
      made.push(target);
      mkdirSync(path.join(target, 'dir'));
      own(path.join(target, 'dir'));
      writeFileSync(path.join(target, 'file'), 'host file\n');
      own(path.join(target, 'file'));
      before0 = snapshot(target);
    });
    after(() => {
      for (const dir of made) rmSync(dir, { recursive: true, force: true });
    });

    it('a link planted at /opt while the layer was off (absolute, relative, dangling, to a file) is refused once the daemon restarts with the layer on; a removed /opt is made again', async () => {
      const plants: Record<string, string> = {
        'opt-abs': target,
        'opt-rel': relativeTo(target),
        'opt-dangling': path.join(target, 'missing'),
        'opt-file': path.join(target, 'file'),
        'opt-dir-rel': relativeTo(path.join(target, 'dir')),
      };
      const off = await startTestSandboxd(as);
      let on: TestSandboxd | null = null;
      try {
        for (const [name, link] of Object.entries(plants)) {
          assert.equal((await api(off, 'POST', '/v1/sandboxes', { name })).status, 201);
          const r = await sh(off, name, `rm -rf /opt && ln -s '${link}' /opt && ls -ld /opt`, {
            user: 'root',
          });
          assert.equal(r.exitCode, 0, r.stderr);
        }
        assert.equal((await api(off, 'POST', '/v1/sandboxes', { name: 'opt-gone' })).status, 201);
        assert.equal((await sh(off, 'opt-gone', 'rm -rf /opt', { user: 'root' })).exitCode, 0);
        // Sandboxes outlive their daemon: each stops, so the next daemon's first exec starts it again.
        for (const name of [...Object.keys(plants), 'opt-gone']) await killHolder(off, name);
        await off.stop({ keepData: true });
        on = await startTestSandboxd({ dataDir: off.dataDir, token: off.token, runtimeLayer: true, ...as });
        const errors = new Map<string, Error | null>();
        for (const name of Object.keys(plants)) errors.set(name, await startError(on, name));
        assert.deepEqual(snapshot(target), before0, 'nothing changed outside the sandboxes');
        for (const [name, err] of errors)
          assertRefused(on, name, err, /\/opt in the sandbox is a symbolic link;/);
        const gone = await sh(on, 'opt-gone', `ls /opt/paddock/${sharedLayerHash()}/bin | grep -c .`);
        assert.equal(gone.exitCode, 0, gone.stderr);
        assert.ok(Number(gone.stdout) > 0, 'the mount point is made again and the layer is there');
        assert.deepEqual(snapshot(target), before0, 'nothing changed outside the sandboxes');
      } finally {
        await on?.stop();
        if (!on) await off.stop();
      }
    });

    it('a checkpoint holding a planted /opt link, restored into a fresh sandbox once the layer is on (a warm start), is refused', async () => {
      const off = await startTestSandboxd(as);
      let on: TestSandboxd | null = null;
      try {
        assert.equal((await api(off, 'POST', '/v1/sandboxes', { name: 'ck-src' })).status, 201);
        const r = await sh(off, 'ck-src', `rm -rf /opt && ln -s '${relativeTo(target)}' /opt`, {
          user: 'root',
        });
        assert.equal(r.exitCode, 0, r.stderr);
        const id = checkpointIdOf(
          ndjsonLines((await api(off, 'POST', '/v1/sandboxes/ck-src/checkpoint')).text),
        );
        assert.ok(id, 'checkpointed');
        await off.stop({ keepData: true });
        on = await startTestSandboxd({ dataDir: off.dataDir, token: off.token, runtimeLayer: true, ...as });
        assert.equal((await api(on, 'POST', '/v1/sandboxes', { name: 'ck-dst' })).status, 201);
        const restore = await api(on, 'POST', `/v1/sandboxes/ck-dst/checkpoints/${id}/restore`);
        assert.ok(!restore.text.includes(on.dataDir), `no host path in the answer: ${restore.text}`);
        const err = await startError(on, 'ck-dst');
        assert.deepEqual(snapshot(target), before0, 'nothing changed outside the sandboxes');
        assertRefused(on, 'ck-dst', err, /\/opt in the sandbox is a symbolic link;/);
      } finally {
        await on?.stop();
        if (!on) await off.stop();
      }
    });

    it('a link at any other mount point or a directory above one (/run, /proc, /dev, /usr, /var, /var/lib, /opt, /opt/paddock) is refused on a plain restart (the holder killed)', async () => {
      const plants: Record<string, [string, string]> = {
        'mp-run': ['run', target],
        'mp-proc': ['proc', relativeTo(target)],
        'mp-dev': ['dev', target],
        'mp-usr': ['usr', path.join(target, 'missing')],
        'mp-var': ['var', target],
        'mp-varlib': ['var/lib', relativeTo(path.join(target, 'dir'))],
        'mp-opt': ['opt', target],
        'mp-paddock': ['opt/paddock', path.join(target, 'file')],
      };
      const d = await startTestSandboxd({ runtimeLayer: true, ...as });
      try {
        const errors = new Map<string, Error | null>();
        for (const [name, [at, link]] of Object.entries(plants)) {
          // /var is a directory above a mount point only where the host has a dpkg database (base.ts).
          if (at.startsWith('var') && !readdirSync('/var/lib').includes('dpkg')) continue;
          assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
          assert.equal((await sh(d, name, 'true')).exitCode, 0);
          // The sandbox's root cannot replace a mounted directory; its writable layer can hold the link
          // anyway (a layer of an earlier start, a restored checkpoint): planted there, as it would be.
          const p = path.join(sandboxLayer(d, name), 'root', at);
          rmSync(p, { recursive: true, force: true });
          const made = mkdirSync(path.dirname(p), { recursive: true });
          if (made) own(made);
          symlinkSync(link, p);
          await killHolder(d, name);
          errors.set(name, await startError(d, name));
        }
        assert.deepEqual(snapshot(target), before0, 'nothing changed outside the sandboxes');
        for (const [name, err] of errors) {
          const at = plants[name]![0];
          assertRefused(
            d,
            name,
            err,
            new RegExp(`/${at.split('/')[0]}[^"]* in the sandbox is (a symbolic link|not a directory);`),
          );
        }
      } finally {
        await d.stop();
      }
    });
  });

  describe(`the runtime layer's mount (${mode.name})`, () => {
    let d: TestSandboxd;
    before(async () => {
      d = await startTestSandboxd({ runtimeLayer: true, ...as });
      assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'ly-info' })).status, 201);
    });
    after(async () => {
      await d?.stop();
    });

    it('shows no host path inside (mountinfo, cgroup, fd links, environment), the layer mount included', async () => {
      const r = await sh(
        d,
        'ly-info',
        `cat /proc/self/mountinfo /proc/self/cgroup /proc/self/environ; for f in /proc/self/fd/*; do readlink $f || true; done; echo; ls /opt/paddock/${sharedLayerHash()}/bin`,
      );
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, / \/opt\/paddock ro,/, 'the layer is mounted read-only');
      assert.match(r.stdout, /\nclaude\n/, 'and its commands are there');
      const layers = sharedLayerDir();
      for (const leak of [d.dataDir, layers, path.dirname(layers), 'tenants/', 'ly-info']) {
        assert.ok(!r.stdout.includes(leak), `${leak} visible inside:\n${r.stdout}`);
      }
    });
  });
}

if (process.getuid?.() === 0)
  describe('the idmapped host /usr (root)', () => {
    let d: TestSandboxd;
    let dir: string;
    before(async () => {
      // Another host user's files under the host's /usr, and one of host root's.
      dir = mkdtempSync('/usr/local/share/paddock-idmap-');
      for (const [name, mode, uid] of [
        ['private-4242', 0o600, 4242],
        ['shared-4242', 0o644, 4242],
        ['root-private', 0o600, 0],
      ] as const) {
        writeFileSync(path.join(dir, name), `${name}\n`, { mode });
        chownSync(path.join(dir, name), uid, uid);
      }
      mkdirSync(path.join(dir, 'dir-4242'), { mode: 0o700 });
      writeFileSync(path.join(dir, 'dir-4242', 'f'), 'f\n');
      chownSync(path.join(dir, 'dir-4242'), 4242, 4242);
      d = await startTestSandboxd();
      assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'idm' })).status, 201);
    });
    after(async () => {
      await d?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it("keeps other host users' private files unreadable to the sandbox root, shown as nobody; host root's are its own", async () => {
      const at = `/usr/local/share/${path.basename(dir)}`;
      const r = await sh(
        d,
        'idm',
        `cd ${at} && stat -c '%n %u' private-4242 root-private; for f in private-4242 shared-4242 root-private dir-4242/f; do cat $f 2>/dev/null || echo "$f denied"; done; ls dir-4242 2>/dev/null || echo 'ls denied'; touch shared-4242 2>/dev/null || echo 'touch denied'`,
        { user: 'root' },
      );
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(
        r.stdout,
        [
          'private-4242 65534',
          'root-private 0',
          'private-4242 denied',
          'shared-4242',
          'root-private',
          'dir-4242/f denied',
          'ls denied',
          'touch denied',
          '',
        ].join('\n'),
      );
    });
  });
