/**
 * Issue 34, finding 1, written as the attacks: the sandbox's root plants links in its own writable layer at the
 * paths sandboxd works on from the host side (docs/sandboxd.md, "Host-side operations on sandbox files"), then
 * makes sandboxd do that work: a restart (it kills the holder of its user namespace), a checkpoint of the
 * running sandbox (also while it swaps its home with a link in a loop, against any check before the act), a
 * restore of a poisoned checkpoint into a fresh sandbox (which also gives the restored files to the new
 * sandbox's ids, root mode), a daemon restart after the init died (a host reboot), a file write and a destroy.
 * Each link is absolute, relative (from the link's host directory), dangling, to a directory, to a file, and
 * into a runtime layers directory (its `<hash>` and its `bin`, which every sandbox would see). Nothing outside
 * the sandbox may change: owners, modes and entries of a canary host tree stay as they were; the sandbox keeps
 * working and keeps what it made of its home. Root mode (disk images on, the defaults) and rootless (the
 * service user's own files are the canary there: its worst case).
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
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { initPid, sandboxDir, sandboxLayer } from './attacks.ts';
import { processAlive, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, checkpointIdOf, ndjsonLines, sh, waitFor } from './helpers.ts';
import { type DaemonMode, daemonModes } from './modes.ts';

/** Every entry under `root` (never following a link): type, owner and mode, by relative path. */
function snapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const st = lstatSync(path.join(root, rel));
    const kind = st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : 'file';
    out[rel || '.'] = `${kind} ${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}`;
    if (kind === 'dir') for (const e of readdirSync(path.join(root, rel)).sort()) walk(path.join(rel, e));
  };
  walk('');
  return out;
}

/** The host pid of the holder of sandbox `name`'s user namespace, as its record holds it. */
function holderPid(d: TestSandboxd, name: string): number {
  const rec = JSON.parse(readFileSync(path.join(sandboxDir(d, name), 'sandbox.json'), 'utf8')) as {
    init: { holderPid: number } | null;
  };
  return rec.init?.holderPid ?? 0;
}

/** renameat2(2) by architecture (perl's syscall needs the number). */
const RENAMEAT2: Record<string, number> = { x64: 316, arm64: 276 };

/** Where inside the sandbox the links go: the paths a start makes and chowns on the host side. */
type At = '/home' | '/home/sandbox';
const HASH = 'a1b2c3d4e5f60718';

/** A link the sandbox plants: its target, given the canary and the host directory that holds the link. */
const PLANTS: { at: At; label: string; target(canary: string, linkDir: string): string }[] = (
  ['/home', '/home/sandbox'] as const
).flatMap((at) => [
  { at, label: 'absolute, to a directory', target: (c: string) => path.join(c, 'dir') },
  {
    at,
    label: 'relative, to a directory',
    target: (c: string, linkDir: string) => path.relative(linkDir, path.join(c, 'dir')),
  },
  { at, label: 'dangling', target: (c: string) => path.join(c, 'dir', 'missing', 'deeper') },
  { at, label: 'to a file', target: (c: string) => path.join(c, 'file.txt') },
  {
    at,
    label: 'into a runtime layers directory',
    target: (c: string) => path.join(c, 'layers', HASH, ...(at === '/home' ? [] : ['bin'])),
  },
]);

/**
 * A fresh canary host tree: a directory, a file, and a runtime layers directory (`<hash>/bin/<tool>`). Rootless,
 * it is the service user's (what its host side could change) with root's group (a chown to the user's own group
 * shows).
 */
function makeCanary(user: DaemonMode['user']): { root: string; before: Record<string, string> } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'paddock-planted-'));
  mkdirSync(path.join(root, 'dir'));
  writeFileSync(path.join(root, 'dir', 'kept.txt'), 'kept\n');
  writeFileSync(path.join(root, 'file.txt'), 'canary\n', { mode: 0o600 });
  mkdirSync(path.join(root, 'layers', HASH, 'bin'), { recursive: true });
  writeFileSync(path.join(root, 'layers', HASH, 'bin', 'claude'), '#!/bin/sh\n', { mode: 0o755 });
  if (user) {
    const chownAll = (p: string) => {
      chownSync(p, user.uid, 0);
      if (lstatSync(p).isDirectory()) for (const e of readdirSync(p)) chownAll(path.join(p, e));
    };
    chownAll(root);
  }
  return { root, before: snapshot(root) };
}

function attackSuite({ name: mode, user }: DaemonMode): void {
  describe(`host-side operations never follow a link the sandbox planted (${mode})`, () => {
    let d: TestSandboxd;
    let n = 0;
    const fresh = () => `pl-${++n}`;

    before(async () => {
      d = await startTestSandboxd(user ? { user } : {});
    });
    after(async () => {
      await d?.stop();
    });

    async function create(name: string): Promise<void> {
      assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
      const r = await sh(d, name, 'true');
      assert.equal(r.exitCode, 0, r.stderr);
    }

    /** As the sandbox's root: runs `script` in the sandbox. */
    async function asRoot(name: string, script: string): Promise<void> {
      const r = await sh(d, name, `cd / && ${script}`, { user: 'root', dir: '/' });
      assert.equal(r.exitCode, 0, r.stderr);
    }

    /** Gives the sandbox its home back (as its root), for the next plant. */
    function repair(name: string): Promise<void> {
      // Rootless, the namespace of root execs maps only its root: the sandbox user is the same host uid.
      return asRoot(
        name,
        `rm -rf /home && mkdir -p /home/sandbox && chmod 755 /home /home/sandbox${mode === 'root' ? ' && chown 1000:1000 /home/sandbox' : ''}`,
      );
    }

    /**
     * For every plant: a fresh canary, the link planted in sandbox `src` as its root, `trigger` run (it answers
     * the sandbox to look at afterwards); then nothing of the canary may have changed, and that sandbox works
     * and still has the link (what it made of its home). Every plant is tried; the failures are listed.
     */
    async function everyPlant(
      what: string,
      src: string,
      trigger: (canary: string) => Promise<string>,
    ): Promise<void> {
      const failed: string[] = [];
      for (const p of PLANTS) {
        const c = makeCanary(user);
        const which = `${p.at} ${p.label}`;
        try {
          const target = p.target(c.root, path.join(sandboxLayer(d, src), 'root', path.posix.dirname(p.at)));
          await asRoot(src, `rm -rf -- ${p.at} && ln -s -- '${target}' ${p.at}`);
          const checked = await trigger(c.root);
          const after = snapshot(c.root);
          const changed = Object.keys({ ...after, ...c.before }).filter((k) => after[k] !== c.before[k]);
          if (changed.length > 0)
            failed.push(
              `${which}: the host changed: ${changed.map((k) => `${k} ${c.before[k] ?? 'absent'} -> ${after[k] ?? 'absent'}`).join(', ')}`,
            );
          const r = await sh(d, checked, `echo ok; readlink -- ${p.at}`, { dir: '/' });
          if (r.exitCode !== 0 || r.stdout !== `ok\n${target}\n`)
            failed.push(`${which}: the sandbox answers ${r.exitCode} ${JSON.stringify(r.stdout + r.stderr)}`);
        } catch (err) {
          failed.push(`${which}: ${(err as Error).message.replace(/\s+/g, ' ').slice(0, 300)}`);
        } finally {
          rmSync(c.root, { recursive: true, force: true });
        }
        await repair(src).catch((err: unknown) => failed.push(`${which}: repair: ${(err as Error).message}`));
      }
      assert.deepEqual(failed, [], `${what}:\n${failed.join('\n')}`);
    }

    it('restart (the sandbox root kills its user namespace holder): nothing on the host changes', async () => {
      const name = fresh();
      await create(name);
      await everyPlant('a restart', name, async () => {
        const pid = initPid(d, name);
        const holder = holderPid(d, name);
        // Its own exec may end with the holder (137): what counts is the restart that follows.
        await sh(d, name, 'pkill -9 -x sleep', { user: 'root', dir: '/' });
        await waitFor(() => !processAlive(holder), 'the holder to be gone');
        const r = await sh(d, name, 'echo restarted', { dir: '/' });
        assert.equal(r.exitCode, 0, r.stderr);
        assert.notEqual(initPid(d, name), pid, 'the sandbox was started again');
        return name;
      });
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
    });

    it('a sandbox that removed its home (a whiteout in the layer) starts again without one', async () => {
      const name = fresh();
      await create(name);
      for (const gone of ['/home/sandbox', '/home']) {
        await asRoot(name, `rm -rf ${gone}`);
        const pid = initPid(d, name);
        const holder = holderPid(d, name);
        await sh(d, name, 'pkill -9 -x sleep', { user: 'root', dir: '/' });
        await waitFor(() => !processAlive(holder), 'the holder to be gone');
        const r = await sh(d, name, `test -e ${gone} || echo gone`, { dir: '/' });
        assert.equal(r.exitCode, 0, r.stderr);
        assert.equal(r.stdout, 'gone\n', gone);
        assert.notEqual(initPid(d, name), pid, 'the sandbox was started again');
        const home = await sh(d, name, 'pwd');
        assert.equal(home.exitCode, 125, 'an exec in the missing home says so');
        assert.match(home.stderr, /cannot change directory to \/home\/sandbox/);
        await repair(name);
      }
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
    });

    it('checkpoint of the running sandbox: nothing on the host changes', async () => {
      const name = fresh();
      await create(name);
      await everyPlant('a checkpoint', name, async () => {
        const ck = await api(d, 'POST', `/v1/sandboxes/${name}/checkpoint`);
        assert.equal(ck.status, 200, ck.text);
        const lines = ndjsonLines(ck.text);
        assert.ok(!lines.some((l) => l['type'] === 'error'), ck.text);
        const id = checkpointIdOf(lines)!;
        assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}/checkpoints/${id}`)).status, 204);
        return name;
      });
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
    });

    it('checkpoints while the sandbox swaps /home/sandbox with a link in a loop: nothing on the host changes', {
      timeout: 300_000,
    }, async () => {
      const nr = RENAMEAT2[process.arch];
      assert.ok(nr, `renameat2 syscall number for ${process.arch}`);
      const name = fresh();
      await create(name);
      const c = makeCanary(user);
      try {
        // renameat2(RENAME_EXCHANGE) of the home and a link to the canary, forever: a check before the act
        // would see one and act on the other. (Its name is spelled so that no command line naming it matches.) Rootless, a checkpoint stops the sandbox (no freezer here), so
        // the swapper is started again before each.
        // A home of the sandbox's own making (a merged directory of the base cannot be renamed: EXDEV).
        await repair(name);
        await asRoot(name, `ln -s '${path.join(c.root, 'dir')}' /home/swap`);
        const swapper = `chdir "/home" or die; $0 = "home-" . "swapper"; my ($x, $y) = ("sandbox", "swap"); while (1) { syscall(${nr}, -100, $x, -100, $y, 2) }`;
        for (let i = 0; i < 8; i++) {
          await asRoot(
            name,
            `pgrep -f '[h]ome-swapper' >/dev/null || setsid -f perl -e '${swapper}' </dev/null >/dev/null 2>&1`,
          );
          // Running, and swapping: the home is seen as the link now and then.
          await waitFor(
            async () =>
              (
                await sh(d, name, 'for i in $(seq 200); do readlink /home/sandbox; done; true', { dir: '/' })
              ).stdout.includes(c.root),
            'the swapper to swap',
          );
          const ck = await api(d, 'POST', `/v1/sandboxes/${name}/checkpoint`);
          assert.equal(ck.status, 200, ck.text);
          const id = checkpointIdOf(ndjsonLines(ck.text));
          if (id)
            assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}/checkpoints/${id}`)).status, 204);
          assert.deepEqual(snapshot(c.root), c.before, `checkpoint ${i + 1} changed the host`);
        }
        await asRoot(name, "pkill -f '[h]ome-swapper'; true");
        const r = await sh(d, name, 'echo ok', { dir: '/' });
        assert.equal(r.stdout, 'ok\n', r.stderr);
      } finally {
        rmSync(c.root, { recursive: true, force: true });
      }
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
    });

    it('restore of a poisoned checkpoint into a fresh sandbox (a warm start): nothing on the host changes', {
      timeout: 600_000,
    }, async () => {
      const src = fresh();
      await create(src);
      const restored: string[] = [];
      await everyPlant('a restore', src, async (canary) => {
        // Links elsewhere in the layer too: the restore gives every restored file to the new sandbox's ids.
        await asRoot(
          src,
          `rm -rf /tmp/l && mkdir -p /tmp/l/deep/a && ln -s '${path.join(canary, 'dir')}' /tmp/l/to-dir && ln -s '${path.join(canary, 'file.txt')}' /tmp/l/to-file && ln -s '${path.join(canary, 'nothing')}' /tmp/l/dangling && ln -s '${canary}' /tmp/l/deep/a/up`,
        );
        const ck = await api(d, 'POST', `/v1/sandboxes/${src}/checkpoint`);
        assert.equal(ck.status, 200, ck.text);
        const id = checkpointIdOf(ndjsonLines(ck.text))!;
        const dst = fresh();
        restored.push(dst);
        assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: dst })).status, 201);
        const rs = await api(d, 'POST', `/v1/sandboxes/${dst}/checkpoints/${id}/restore`);
        assert.equal(rs.status, 200, rs.text);
        assert.ok(!ndjsonLines(rs.text).some((l) => l['type'] === 'error'), rs.text);
        assert.equal((await sh(d, dst, 'readlink /tmp/l/deep/a/up', { dir: '/' })).stdout, `${canary}\n`);
        assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${src}/checkpoints/${id}`)).status, 204);
        return dst;
      });
      for (const dst of restored) assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${dst}`)).status, 204);
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${src}`)).status, 204);
    });

    it('daemon restart after the init died (a host reboot), then the next exec: nothing on the host changes', {
      timeout: 600_000,
    }, async () => {
      const name = fresh();
      await create(name);
      await everyPlant('a daemon restart', name, async () => {
        const pid = initPid(d, name);
        const { dataDir, token } = d;
        await d.stop({ keepData: true });
        process.kill(pid, 'SIGKILL');
        d = await startTestSandboxd({ dataDir, token, ...(user ? { user } : {}) });
        const r = await sh(d, name, 'echo started', { dir: '/' });
        assert.equal(r.exitCode, 0, r.stderr);
        assert.notEqual(initPid(d, name), pid, 'the sandbox was started again');
        return name;
      });
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
    });

    it('file writes through a planted link land inside the sandbox; a destroy follows no link', async () => {
      const name = fresh();
      await create(name);
      const c = makeCanary(user);
      try {
        const dir = path.join(c.root, 'dir');
        // The link resolves inside the sandbox too (the host path made there as well).
        await asRoot(
          name,
          `mkdir -p '${dir}' && chmod 777 '${dir}' && rm -rf /home/sandbox && ln -s '${dir}' /home/sandbox`,
        );
        const w = await api(
          d,
          'PUT',
          `/v1/sandboxes/${name}/fs/write?path=${encodeURIComponent('/home/sandbox/sub/written.txt')}&mkdirParents=true`,
          new TextEncoder().encode('inside\n'),
        );
        assert.equal(w.status, 204, w.text);
        const r = await sh(d, name, `cat '${path.join(dir, 'sub', 'written.txt')}'`, { dir: '/' });
        assert.equal(r.stdout, 'inside\n', 'the write followed the link inside the sandbox');
        assert.deepEqual(snapshot(c.root), c.before, 'a file write changed the host');
        await asRoot(
          name,
          `ln -s '${path.join(c.root, 'file.txt')}' /tmp/to-file && ln -s '${c.root}' /tmp/to-canary && ln -s ../../../../../../../../../../../.. /tmp/to-root`,
        );
        const sbDir = sandboxDir(d, name);
        assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
        assert.throws(() => lstatSync(sbDir), 'the sandbox directory is gone');
        assert.deepEqual(snapshot(c.root), c.before, 'a destroy changed the host');
      } finally {
        rmSync(c.root, { recursive: true, force: true });
      }
    });
  });
}

for (const mode of daemonModes()) attackSuite(mode);
