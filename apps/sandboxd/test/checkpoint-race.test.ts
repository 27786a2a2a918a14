/**
 * Issue 12, finding 4, written as the attack: while a checkpoint is taken, a process in a *nested* pid
 * namespace of the sandbox (out of reach of a SIGSTOP of the sandbox's own pid namespace) keeps swapping a
 * directory of the layer with a symlink to a host path (renameat2 RENAME_EXCHANGE, in a loop), hoping the copy
 * follows it. Targets: a host canary file (mode 600; owned by root, or rootless by sandboxd's own user) and
 * another sandbox's file. Neither may ever appear in a checkpoint, on the host side or restored.
 * Root mode (disk images) and rootless (directory layer, no cgroup freezer on this host: the sandbox is stopped
 * for the copy). docs/sandboxd.md "Checkpoints".
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, checkpointIdOf, ndjsonLines, sh, waitFor } from './helpers.ts';
import { type DaemonMode, daemonModes } from './modes.ts';

/** renameat2(2) by architecture (perl's syscall needs the number). */
const RENAMEAT2: Record<string, number> = { x64: 316, arm64: 276 };

function sandboxDir(d: TestSandboxd, name: string): string {
  const tenants = path.join(d.dataDir, 'tenants');
  for (const t of readdirSync(tenants)) {
    const dir = path.join(tenants, t, 'sandboxes', name);
    try {
      statSync(dir);
      return dir;
    } catch {}
  }
  throw new Error(`no directory for sandbox ${name}`);
}

/**
 * Whether any regular file under `p` (never following symlinks) contains one of the needles. Asynchronous: a
 * long synchronous scan would keep the test's HTTP client from seeing the daemon close idle keep-alive sockets.
 */
async function contains(p: string, needles: Buffer[]): Promise<string | null> {
  const st = await fs.lstat(p);
  if (st.isDirectory()) {
    for (const e of await fs.readdir(p)) {
      const hit = await contains(path.join(p, e), needles);
      if (hit) return hit;
    }
    return null;
  }
  if (!st.isFile()) return null;
  const fh = await fs.open(p, 'r');
  try {
    const chunk = Buffer.alloc(8 * 1024 * 1024);
    const overlap = 64;
    let carry = Buffer.alloc(0);
    for (;;) {
      const { bytesRead } = await fh.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) return null;
      const window = Buffer.concat([carry, chunk.subarray(0, bytesRead)]);
      for (const needle of needles) if (window.includes(needle)) return `${p}: ${needle.toString()}`;
      carry = window.subarray(Math.max(0, window.length - overlap));
    }
  } finally {
    await fh.close();
  }
}

/** perl: chdir to the race dir, then renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_EXCHANGE) forever. */
const swapper = (nr: number) =>
  `chdir $ARGV[0] or die; $0 = "race-swapper"; my ($x, $y) = ("a", "b"); while (1) { syscall(${nr}, -100, $x, -100, $y, 2) }`;

function attackSuite({ name: mode, user }: DaemonMode): void {
  describe(`checkpoint symlink-swap race from a nested pid namespace (${mode})`, () => {
    let d: TestSandboxd;
    let canaryDir = '';
    const hostCanary = `host-canary-${randomBytes(12).toString('hex')}`;
    const victimCanary = `victim-canary-${randomBytes(12).toString('hex')}`;
    const needles = [Buffer.from(hostCanary), Buffer.from(victimCanary)];
    const names = ['race-attacker', 'race-victim', 'race-restored'];

    before(async () => {
      canaryDir = mkdtempSync(path.join(os.tmpdir(), 'paddock-ckpt-canary-'));
      mkdirSync(path.join(canaryDir, 'secret'));
      writeFileSync(path.join(canaryDir, 'secret', 'canary.txt'), `${hostCanary}\n`, { mode: 0o600 });
      // Rootless: the file belongs to sandboxd's own user (what its copy could read), root mode to root. Run as
      // an ordinary user, sandboxd is that user and the file is already its.
      if (user)
        for (const p of [
          canaryDir,
          path.join(canaryDir, 'secret'),
          path.join(canaryDir, 'secret', 'canary.txt'),
        ])
          chownSync(p, user.uid, user.gid);
      d = await startTestSandboxd({
        ...(user ? { user } : {}),
        env: { SANDBOXD_DISK_MAX: '128m' },
      });
      for (const name of names) assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
    });
    after(async () => {
      try {
        if (d) for (const n of names) await api(d, 'DELETE', `/v1/sandboxes/${n}`);
        await d?.stop();
      } finally {
        if (canaryDir) rmSync(canaryDir, { recursive: true, force: true });
      }
    });

    it('never copies a host canary (mode 600) or another sandbox’s file into a checkpoint or a restored sandbox', {
      timeout: 300_000,
    }, async () => {
      const nr = RENAMEAT2[process.arch];
      assert.ok(nr, `renameat2 syscall number for ${process.arch}`);
      const victim = await sh(
        d,
        'race-victim',
        `mkdir -p ~/victim && echo ${victimCanary} > ~/victim/secret.txt`,
      );
      assert.equal(victim.exitCode, 0, victim.stderr);
      const vdir = sandboxDir(d, 'race-victim');
      const victimHostDir = [
        path.join(vdir, 'disk', 'layer', 'root', 'home', 'sandbox', 'victim'),
        path.join(vdir, 'layer', 'root', 'home', 'sandbox', 'victim'),
      ].find((p) => {
        try {
          return readFileSync(path.join(p, 'secret.txt'), 'utf8').includes(victimCanary);
        } catch {
          return false;
        }
      });
      assert.ok(victimHostDir, 'the victim’s file is where an attacker reading mountinfo would look');

      // Each race dir: `a` is a real directory whose big first file slows the copy, followed by files named
      // like the target's; `b` is a symlink to the host target. The swapper exchanges them forever.
      const setup = await sh(
        d,
        'race-attacker',
        `set -e
         for r in host victim; do
           mkdir -p ~/race-$r/a
           head -c 20971520 /dev/zero > ~/race-$r/a/0big
         done
         echo decoy > ~/race-host/a/canary.txt
         echo decoy > ~/race-victim/a/secret.txt
         ln -s ${path.join(canaryDir, 'secret')} ~/race-host/b
         ln -s ${victimHostDir} ~/race-victim/b
         for r in host victim; do
           setsid -f unshare --user --map-root-user --pid --fork --mount-proc \\
             perl -e '${swapper(nr)}' ~/race-$r \\
             </dev/null >/dev/null 2>&1
         done`,
        { timeoutMs: 60_000 },
      );
      assert.equal(setup.exitCode, 0, setup.stderr);
      // The swappers run in a pid namespace of their own, below the sandbox's.
      await waitFor(async () => {
        const ps = await sh(
          d,
          'race-attacker',
          'for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null; echo; done',
        );
        return (ps.stdout.match(/race-swapper/g) ?? []).length >= 2;
      }, 'the swappers to run');
      const swapped = await sh(
        d,
        'race-attacker',
        'for i in $(seq 100); do readlink ~/race-host/a; done; true',
      );
      assert.ok(swapped.stdout.includes(canaryDir), 'the exchange really happens');

      const ckptRoot = path.join(path.dirname(path.dirname(sandboxDir(d, 'race-attacker'))), 'checkpoints');
      for (let round = 0; round < 4; round++) {
        const res = await api(d, 'POST', '/v1/sandboxes/race-attacker/checkpoint');
        const lines = ndjsonLines(res.text);
        assert.ok(!lines.some((l) => l['type'] === 'error'), res.text);
        const id = checkpointIdOf(lines) as string;
        assert.equal(
          await contains(path.join(ckptRoot, id), needles),
          null,
          'nothing foreign in the checkpoint files',
        );

        const rs = await api(d, 'POST', `/v1/sandboxes/race-restored/checkpoints/${id}/restore`);
        assert.ok(!ndjsonLines(rs.text).some((l) => l['type'] === 'error'), rs.text);
        const grep = await sh(
          d,
          'race-restored',
          `grep -rs -e ${hostCanary} -e ${victimCanary} ~ /tmp; echo "rc=$?"; ls ~/race-host`,
          { timeoutMs: 60_000 },
        );
        assert.match(grep.stdout, /^rc=1$/m, `a restored checkpoint holds foreign data: ${grep.stdout}`);
        assert.match(grep.stdout, /\ba\b/, 'the restored sandbox has the attacker’s tree');
        if (mode === 'rootless') {
          // No cgroup freezer here: the sandbox was stopped for the copy (the swappers with it) and started again.
          assert.ok(
            lines.some((l) => String(l['data']).includes('stopped for the copy')),
            res.text,
          );
          assert.equal((await sh(d, 'race-attacker', 'echo alive')).stdout, 'alive\n');
          await sh(
            d,
            'race-attacker',
            `for r in host victim; do setsid -f unshare --user --map-root-user --pid --fork --mount-proc perl -e '${swapper(nr)}' ~/race-$r </dev/null >/dev/null 2>&1; done`,
          );
        }
      }
      // The victim's file is intact and the victim is unaffected.
      assert.equal((await sh(d, 'race-victim', 'cat ~/victim/secret.txt')).stdout, `${victimCanary}\n`);
    });

    if (mode === 'rootless') {
      it('documents what rootless gets: no disk image (disk_bytes null), sized /dev/shm and /run', async () => {
        const limits = (await api(d, 'GET', '/v1/sandboxes/race-victim')).json['limits'] as Record<
          string,
          unknown
        >;
        assert.equal(limits['disk_bytes'], null);
        const df = await sh(d, 'race-victim', 'df -B1 --output=size /dev/shm /run | tail -2');
        assert.deepEqual(df.stdout.trim().split(/\s+/).map(Number), [64 * 1024 * 1024, 16 * 1024 * 1024]);
      });
    }
  });
}

// As root: root mode and rootless (as the system user modes.ts prepares); as an ordinary user: rootless.
for (const mode of daemonModes()) attackSuite(mode);
