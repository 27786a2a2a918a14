/**
 * Disk limits (issue 12, finding 11; docs/sandboxd.md "Disk"): a sandbox filling its disk, /dev/shm or /run
 * gets ENOSPC inside; the host only ever holds its bounded image; other sandboxes keep working.
 * Root mode. Run as an ordinary user the daemon is rootless, which has no disk images (loop mounts need root):
 * the tests then check what docs/sandboxd.md documents for it instead (no disk limit, reported and logged;
 * /dev/shm, /run and checkpoints as in root mode). checkpoint-race.test.ts checks rootless too.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, ndjsonLines, sh } from './helpers.ts';

const MB = 1024 * 1024;
const LIMIT = 64 * MB;
const ROOTLESS = process.getuid?.() !== 0;

/** Bytes allocated on the host under `dir` (blocks, not apparent sizes; not inside the mounted disk). */
function allocated(dir: string): number {
  return Number(execFileSync('du', ['-s', '-x', '-B1', '--', dir], { encoding: 'utf8' }).split('\t')[0]);
}

/** The sandbox's own directory on the host (found by name: its tenant directory is the daemon's business). */
function sandboxDir(d: TestSandboxd, name: string): string {
  const tenants = path.join(d.dataDir, 'tenants');
  for (const t of readdirSync(tenants)) {
    const dir = path.join(tenants, t, 'sandboxes', name);
    try {
      readdirSync(dir);
      return dir;
    } catch {}
  }
  throw new Error(`no directory for sandbox ${name}`);
}

let d: TestSandboxd;
before(async () => {
  d = await startTestSandboxd({ env: { SANDBOXD_DISK_MAX: '64m' } });
  for (const name of ['dk-fill', 'dk-other'])
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
});
after(async () => {
  for (const n of ['dk-fill', 'dk-other']) await api(d, 'DELETE', `/v1/sandboxes/${n}`);
  await d.stop();
});

describe('disk limits', () => {
  if (ROOTLESS)
    it('reports no disk limit rootless (disk_bytes null) but sized /dev/shm and /run, and logs that the limit is not enforced', async () => {
      const res = await api(d, 'GET', '/v1/sandboxes/dk-fill');
      const limits = res.json['limits'] as Record<string, unknown>;
      assert.equal(limits['disk_bytes'], null);
      assert.equal(limits['shm_bytes'], 64 * MB);
      assert.equal(limits['run_bytes'], 16 * MB);
      assert.ok(
        d
          .logs()
          .some((l) => l.includes('disk limit not enforced: a rootless sandboxd cannot mount disk images')),
        d.logs().join('\n'),
      );
      const r = await sh(d, 'dk-other', 'cat /proc/self/mountinfo /proc/self/cgroup');
      assert.equal(r.exitCode, 0, r.stderr);
      for (const leak of [d.dataDir, 'tenants/', 'dk-other']) {
        assert.ok(!r.stdout.includes(leak), `${leak} visible inside:\n${r.stdout}`);
      }
    });

  if (!ROOTLESS)
    it('reports the disk, /dev/shm and /run sizes in the sandbox limits', async () => {
      const res = await api(d, 'GET', '/v1/sandboxes/dk-fill');
      const limits = res.json['limits'] as Record<string, unknown>;
      assert.equal(limits['disk_bytes'], LIMIT);
      assert.equal(limits['shm_bytes'], 64 * MB);
      assert.equal(limits['run_bytes'], 16 * MB);
    });

  if (!ROOTLESS)
    it('shows neither the data dir nor the disk mount point in mountinfo of a sandbox on a disk image', async () => {
      const dir = sandboxDir(d, 'dk-other');
      const r = await sh(d, 'dk-other', 'cat /proc/self/mountinfo /proc/self/cgroup');
      assert.equal(r.exitCode, 0, r.stderr);
      const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
      assert.ok(
        mounts.includes(` ${path.join(dir, 'disk')} `),
        'the image is mounted at <sandbox>/disk on the host',
      );
      // Its overlay names the layer relative to the sandbox directory (disk/layer/...): no host path.
      for (const leak of [d.dataDir, 'tenants/', 'dk-other', 'disk.img']) {
        assert.ok(!r.stdout.includes(leak), `${leak} visible inside:\n${r.stdout}`);
      }
    });

  if (!ROOTLESS)
    it('fails `dd if=/dev/zero of=~/big` beyond SANDBOXD_DISK_MAX with ENOSPC inside; the host holds at most the limit; other sandboxes keep working', async () => {
      await sh(d, 'dk-fill', 'true');
      const dir = sandboxDir(d, 'dk-fill');
      const before = allocated(dir);
      const fill = await sh(d, 'dk-fill', 'dd if=/dev/zero of="$HOME/big" bs=1M count=200; echo "rc=$?"', {
        timeoutMs: 60_000,
      });
      assert.match(fill.stderr, /No space left on device/);
      assert.match(fill.stdout, /rc=1/);
      const size = Number((await sh(d, 'dk-fill', 'stat -c %s "$HOME/big"')).stdout.trim());
      assert.ok(size > 0 && size < LIMIT, `the file stopped below the limit (${size} bytes)`);
      const grown = allocated(dir) - before;
      assert.ok(grown <= LIMIT + 4 * MB, `the host gained ${grown} bytes for a ${LIMIT}-byte disk`);

      // Other sandboxes are untouched, and the full one works again once it frees space.
      const other = await sh(
        d,
        'dk-other',
        'echo ok > "$HOME/f" && cat "$HOME/f" && df -B1 --output=avail / | tail -1',
      );
      assert.equal(other.exitCode, 0, other.stderr);
      assert.equal(other.stdout.split('\n')[0], 'ok');
      assert.ok(
        Number(other.stdout.split('\n')[1]) > LIMIT / 2,
        'the other sandbox still has its free space',
      );
      const again = await sh(
        d,
        'dk-fill',
        'rm "$HOME/big" && echo fine > "$HOME/small" && cat "$HOME/small"',
      );
      assert.equal(again.stdout, 'fine\n', again.stderr);
    });

  it('fails a /dev/shm fill at its size with ENOSPC, and /run is sized too', async () => {
    const fill = await sh(
      d,
      'dk-other',
      'dd if=/dev/zero of=/dev/shm/fill bs=1M count=200; echo "rc=$?"; stat -c %s /dev/shm/fill; rm -f /dev/shm/fill; df -B1 --output=size /run | tail -1',
      { timeoutMs: 60_000 },
    );
    assert.match(fill.stderr, /No space left on device/);
    const [rc, size, runSize] = fill.stdout.trim().split('\n');
    assert.equal(rc, 'rc=1');
    assert.equal(Number(size), 64 * MB);
    assert.equal(Number(runSize), 16 * MB);
  });

  it(`checkpoints a ${ROOTLESS ? 'big file (rootless: no disk limit)' : 'full disk'}, restores it, and deletes the checkpoint, giving its space back`, async () => {
    // Rootless the layer is unbounded: a smaller file than the disk-filling one, the rest as in root mode.
    await sh(
      d,
      'dk-fill',
      `dd if=/dev/zero of="$HOME/big" bs=1M count=${ROOTLESS ? 32 : 200} 2>/dev/null; true`,
      {
        timeoutMs: 60_000,
      },
    );
    const sum = (await sh(d, 'dk-fill', 'sha256sum "$HOME/big"')).stdout;
    const ck = ndjsonLines((await api(d, 'POST', '/v1/sandboxes/dk-fill/checkpoint')).text);
    assert.ok(!ck.some((l) => l['type'] === 'error'), JSON.stringify(ck));
    const id = ck.find((l) => l['checkpoint_id'])?.['checkpoint_id'] as string;
    const ckDir = path.join(path.dirname(path.dirname(sandboxDir(d, 'dk-fill'))), 'checkpoints', id);
    if (!ROOTLESS)
      assert.ok(allocated(ckDir) <= LIMIT + 4 * MB, 'a checkpoint is bounded by the disk limit too');
    else assert.ok(allocated(ckDir) >= 32 * MB, 'the checkpoint holds the file');

    await sh(d, 'dk-fill', 'rm "$HOME/big"');
    const rs = ndjsonLines((await api(d, 'POST', `/v1/sandboxes/dk-fill/checkpoints/${id}/restore`)).text);
    assert.ok(!rs.some((l) => l['type'] === 'error'), JSON.stringify(rs));
    assert.equal((await sh(d, 'dk-fill', 'sha256sum "$HOME/big"')).stdout, sum);

    assert.equal((await api(d, 'DELETE', `/v1/sandboxes/dk-fill/checkpoints/${id}`)).status, 204);
    assert.throws(() => readdirSync(ckDir), /ENOENT/);
    const list = await api(d, 'GET', '/v1/sandboxes/dk-fill/checkpoints');
    assert.deepEqual(list.json['checkpoints'], []);
  });
});

describe('disk configuration', () => {
  const base = { SANDBOXD_TOKEN: 't' };
  it('defaults SANDBOXD_DISK_MAX to 10g (blank = default) and SANDBOXD_CHECKPOINTS_MAX to 5', () => {
    const c = loadConfig({ ...base, SANDBOXD_DISK_MAX: ' ', SANDBOXD_CHECKPOINTS_MAX: '' });
    assert.equal(c.limits.diskBytes, 10 * 1024 ** 3);
    assert.equal(c.checkpointsMax, 5);
    assert.equal(loadConfig({ ...base, SANDBOXD_DISK_MAX: '0' }).limits.diskBytes, 0);
    assert.equal(loadConfig({ ...base, SANDBOXD_DISK_MAX: '512m' }).limits.diskBytes, 512 * MB);
  });

  it('refuses to boot on a malformed or too small SANDBOXD_DISK_MAX or SANDBOXD_CHECKPOINTS_MAX, naming it', () => {
    for (const [k, v] of [
      ['SANDBOXD_DISK_MAX', 'plenty'],
      ['SANDBOXD_DISK_MAX', '-1g'],
      ['SANDBOXD_DISK_MAX', '1m'],
      ['SANDBOXD_CHECKPOINTS_MAX', 'x'],
      ['SANDBOXD_CHECKPOINTS_MAX', '0'],
    ] as const) {
      assert.throws(
        () => loadConfig({ ...base, [k]: v }),
        (e: unknown) => e instanceof ConfigError && e.message.includes(k),
        `${k}=${v}`,
      );
    }
  });
});
