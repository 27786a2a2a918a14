import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sandboxLayer } from './attacks.ts';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, checkpointIdOf, ndjsonLines, sh } from './helpers.ts';

let d: TestSandboxd;
before(async () => {
  d = await startTestSandboxd({ env: { SANDBOXD_CHECKPOINTS_MAX: '2' } });
});
after(async () => {
  for (const n of ['ck-src', 'ck-dst', 'ck-big', 'ck-keep']) await api(d, 'DELETE', `/v1/sandboxes/${n}`);
  await d.stop();
});

// Content hashes plus mode, owner, type and symlink targets of every entry under the given roots.
const MANIFEST =
  'cd / && find home/sandbox/data tmp/ckpt -printf "%p %y %m %U:%G %l\\n" | sort && find home/sandbox/data tmp/ckpt -type f -print0 | sort -z | xargs -0 sha256sum';

/** A checkpoint of ck-keep: its id and its NDJSON lines. */
async function take() {
  const lines = ndjsonLines((await api(d, 'POST', '/v1/sandboxes/ck-keep/checkpoint')).text);
  assert.ok(!lines.some((l) => l['type'] === 'error'), JSON.stringify(lines));
  return { id: lines.find((l) => l['checkpoint_id'])?.['checkpoint_id'] as string, lines };
}

describe('checkpoints', () => {
  it('restores a checkpoint of 1,000 files into a new sandbox byte for byte, modes included', async () => {
    // Generous exec timeouts: 2,000 process starts and a manifest of every file take a minute on a loaded machine.
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'ck-src' })).status, 201);
    const gen = await sh(
      d,
      'ck-src',
      `set -e; mkdir -p ~/data /tmp/ckpt; cd ~/data
       i=0; while [ $i -lt 1000 ]; do d=dir$((i % 20)); mkdir -p $d; head -c $((i * 37 % 5000)) /dev/urandom > $d/f$i; i=$((i+1)); done
       chmod 0600 dir1/f1; chmod 0755 dir2/f2; chmod 0444 dir3/f3; chmod 0700 dir4
       ln -s dir5/f5 link; printf '' > empty; echo tmpfile > /tmp/ckpt/t; rm dir6/f6
       find . -type f | wc -l`,
      { timeoutMs: 180_000 },
    );
    assert.equal(gen.exitCode, 0, gen.stderr);
    assert.equal(gen.stdout.trim(), '1000');
    const before = await sh(d, 'ck-src', MANIFEST, { timeoutMs: 120_000 });
    assert.equal(before.exitCode, 0, before.stderr);

    const res = await api(d, 'POST', '/v1/sandboxes/ck-src/checkpoint');
    assert.equal(res.status, 200);
    const lines = ndjsonLines(res.text);
    for (const l of lines) assert.ok(['info', 'stdout', 'stderr', 'error'].includes(l['type'] as string));
    assert.ok(!lines.some((l) => l['type'] === 'error'), res.text);
    const id = checkpointIdOf(lines) as string;
    assert.match(id, /^ckpt-[0-9a-f]{16}$/);
    // Kept still for the copy (docs/sandboxd.md "Checkpoints"): a frozen disk image or cgroup; without either
    // (rootless without a delegated cgroup, as when the tests run as an ordinary user), stopped.
    const limits = (await api(d, 'GET', '/v1/sandboxes/ck-src')).json['limits'] as Record<string, unknown>;
    const still =
      limits['disk_bytes'] !== null || limits['cgroup'] !== null ? /frozen/ : /stopped for the copy/;
    assert.ok(
      lines.some((l) => still.test(String(l['data']))),
      res.text,
    );

    // Changes after the checkpoint must not leak into the restore.
    await sh(d, 'ck-src', 'echo later > ~/data/later; rm ~/data/dir7/f7');

    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'ck-dst' })).status, 201);
    await sh(d, 'ck-dst', 'echo pre-existing > ~/pre');
    const restore = await api(d, 'POST', `/v1/sandboxes/ck-dst/checkpoints/${id}/restore`);
    assert.equal(restore.status, 200);
    const rlines = ndjsonLines(restore.text);
    assert.ok(!rlines.some((l) => l['type'] === 'error'), restore.text);
    const after = await sh(d, 'ck-dst', MANIFEST, { timeoutMs: 120_000 });
    assert.equal(after.exitCode, 0, after.stderr);
    assert.equal(after.stdout, before.stdout);
    assert.equal((await sh(d, 'ck-dst', 'ls ~/pre ~/data/later')).exitCode, 2);
    if (process.getuid?.() === 0) {
      // Root mode: the restored files (inside ck-dst's disk image when it has one) belong to ck-dst's own host
      // ids, not to ck-src's (the manifest's 1000:1000 inside says the same from the sandbox's side).
      // One line maps the sandbox's whole range: `0 <first host id> 65536`; its user is the first + 1000.
      const map = await sh(d, 'ck-dst', 'cat /proc/self/uid_map');
      const [inner, first] = map.stdout.trim().split(/\s+/).map(Number);
      assert.equal(inner, 0);
      const hostUser = first! + 1000;
      const srcMap = await sh(d, 'ck-src', 'cat /proc/self/uid_map');
      assert.notEqual(map.stdout, srcMap.stdout, 'the two sandboxes have their own ids');
      const f = statSync(
        path.join(sandboxLayer(d, 'ck-dst'), 'root', 'home', 'sandbox', 'data', 'dir1', 'f1'),
      );
      assert.equal(f.uid, hostUser);
      assert.equal(f.gid, hostUser);
    }
  });

  it('answers 404 for unknown checkpoints and sandboxes', async () => {
    assert.equal(
      (await api(d, 'POST', '/v1/sandboxes/ck-src/checkpoints/ckpt-0000000000000000/restore')).status,
      404,
    );
    assert.equal((await api(d, 'POST', '/v1/sandboxes/missing/checkpoint')).status, 404);
  });

  it('checkpoints and restores 100 MB quickly', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'ck-big' })).status, 201);
    await sh(
      d,
      'ck-big',
      'mkdir -p ~/big && for i in 0 1 2 3 4 5 6 7 8 9; do head -c 10485760 /dev/urandom > ~/big/b$i; done',
      { timeoutMs: 60_000 },
    );
    const sum = (await sh(d, 'ck-big', 'cat ~/big/* | sha256sum')).stdout;
    let t = performance.now();
    const ck = ndjsonLines((await api(d, 'POST', '/v1/sandboxes/ck-big/checkpoint')).text);
    const ckMs = performance.now() - t;
    const id = ck.find((l) => l['checkpoint_id'])?.['checkpoint_id'] as string;
    await sh(d, 'ck-big', 'rm -rf ~/big');
    t = performance.now();
    const rs = ndjsonLines((await api(d, 'POST', `/v1/sandboxes/ck-big/checkpoints/${id}/restore`)).text);
    const rsMs = performance.now() - t;
    assert.ok(!rs.some((l) => l['type'] === 'error'));
    assert.equal((await sh(d, 'ck-big', 'cat ~/big/* | sha256sum')).stdout, sum);
    assert.ok(ckMs < 5000 && rsMs < 5000, `checkpoint ${ckMs.toFixed(0)} ms, restore ${rsMs.toFixed(0)} ms`);
  });

  it('deletes a checkpoint through its own sandbox only: 204, then gone from the list and from restore', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'ck-keep' })).status, 201);
    const { id } = await take();
    const ids = async () =>
      (
        (await api(d, 'GET', '/v1/sandboxes/ck-keep/checkpoints')).json['checkpoints'] as { id: string }[]
      ).map((c) => c.id);
    assert.ok((await ids()).includes(id));
    // Another sandbox of the same token cannot delete it; unknown and malformed ids are 404.
    const other = await api(d, 'DELETE', `/v1/sandboxes/ck-dst/checkpoints/${id}`);
    assert.equal(other.status, 404);
    assert.equal(other.json['error'], 'checkpoint_not_found');
    assert.equal(
      (await api(d, 'DELETE', '/v1/sandboxes/ck-keep/checkpoints/ckpt-0000000000000000')).status,
      404,
    );
    assert.equal(
      (await api(d, 'DELETE', '/v1/sandboxes/ck-keep/checkpoints/..%2F..%2Fsandboxes')).status,
      404,
    );

    assert.equal((await api(d, 'DELETE', `/v1/sandboxes/ck-keep/checkpoints/${id}`)).status, 204);
    assert.ok(!(await ids()).includes(id));
    assert.equal((await api(d, 'POST', `/v1/sandboxes/ck-keep/checkpoints/${id}/restore`)).status, 404);
    assert.equal((await api(d, 'DELETE', `/v1/sandboxes/ck-keep/checkpoints/${id}`)).status, 404);
  });

  it('keeps at most SANDBOXD_CHECKPOINTS_MAX checkpoints per sandbox, removing the oldest and saying so', async () => {
    const listed = async () =>
      (await api(d, 'GET', '/v1/sandboxes/ck-keep/checkpoints')).json['checkpoints'] as {
        id: string;
        source_sandbox: string;
      }[];
    const others = (await listed()).filter((c) => c.source_sandbox !== 'ck-keep');
    const first = await take();
    const second = await take();
    assert.ok(!second.lines.some((l) => l['removed_checkpoint_id']));
    const third = await take();
    assert.equal(third.lines.find((l) => l['removed_checkpoint_id'])?.['removed_checkpoint_id'], first.id);
    const after = await listed();
    assert.deepEqual(
      after.filter((c) => c.source_sandbox === 'ck-keep').map((c) => c.id),
      [second.id, third.id],
    );
    // Other sandboxes' checkpoints are neither counted nor removed.
    assert.deepEqual(
      after.filter((c) => c.source_sandbox !== 'ck-keep'),
      others,
    );
  });
});
