/**
 * File writes through the standby chain (src/exec/file-writer.ts) and without it: the same results either
 * way, and no standby outlives its sandboxd or its sandbox.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { initPid as initPidOf } from './attacks.ts';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, checkpointIdOf, ndjsonLines, sh, waitFor } from './helpers.ts';

const TOKEN = 'file-writes-token';
let d: TestSandboxd;
before(async () => {
  d = await startTestSandboxd({ token: TOKEN });
});
after(async () => {
  await d.stop();
});

const enc = (s: string) => new TextEncoder().encode(s);
const write = (name: string, query: string, body: string) =>
  api(d, 'PUT', `/v1/sandboxes/${name}/fs/write?${query}`, enc(body));

const initPid = (name: string) => initPidOf(d, name);

/** Host pids of the waiting standby writes inside the sandbox whose init is `pid` (same pid namespace). */
function standbys(pid: number): number[] {
  let ns = '';
  try {
    ns = readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readlinkSync(`/proc/${e}/ns/pid`) !== ns) continue;
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').includes('IFS= read -r p')) found.push(Number(e));
    } catch {}
  }
  return found;
}

describe('file writes', () => {
  it('writes bursts, a path with a newline, and again after the sandbox killed its own processes', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'fw' })).status, 201);
    try {
      // The first write starts the sandbox; its standby is ready for the next one.
      assert.equal((await write('fw', 'path=first&mode=0600', 'one\n')).status, 204);
      await waitFor(async () => standbys(initPid('fw')).length === 3, 'the standby writes in the sandbox');
      // A burst: three through the standbys, the others through fresh chains; every file whole and its own.
      const burst = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          write('fw', `path=burst/f${i}&mode=0640&mkdirParents=true`, `n${i}\n`),
        ),
      );
      assert.deepEqual(
        burst.map((r) => r.status),
        Array(6).fill(204),
      );
      const newline = await write('fw', `path=${encodeURIComponent('odd\nname')}&mode=0600`, 'nl\n');
      assert.equal(newline.status, 204, newline.text);
      const r = await sh(
        d,
        'fw',
        'cd ~; stat -c "%a %U" first burst/f0 burst/f5; cat first burst/f*; cat "$(printf "odd\\nname")"',
      );
      assert.equal(
        r.stdout,
        '600 sandbox\n640 sandbox\n640 sandbox\none\nn0\nn1\nn2\nn3\nn4\nn5\nnl\n',
        r.stderr,
      );

      // A new file gets its mode at creation; an existing one is rewritten and given the new mode; a mode with
      // execute bits (no umask makes it) is set afterwards.
      await waitFor(async () => standbys(initPid('fw')).length === 3, 'the standbys refilled');
      const again = await Promise.all([
        write('fw', 'path=first&mode=0644', 'two\n'),
        write('fw', 'path=tool&mode=0750', '#!/bin/sh\necho ran\n'),
        write('fw', 'path=public&mode=644', 'p\n'),
      ]);
      assert.deepEqual(
        again.map((r) => r.status),
        [204, 204, 204],
      );
      const modes = await sh(d, 'fw', 'cd ~; stat -c "%a" first tool public; cat first; ./tool');
      assert.equal(modes.stdout, '644\n750\n644\ntwo\nran\n', modes.stderr);

      // Errors read the same through the standby as through a fresh chain.
      await waitFor(async () => standbys(initPid('fw')).length === 3, 'the standbys refilled');
      const refused = await write('fw', 'path=/usr/bin/evil', 'x');
      assert.equal(refused.status, 400, refused.text);
      assert.match(String(refused.json['message']), /^cannot write \/usr\/bin\/evil: .*Permission denied$/);
      const noParent = await write('fw', 'path=missing/x', 'x');
      assert.equal(noParent.status, 400);
      assert.match(String(noParent.json['message']), /^cannot write \/home\/sandbox\/missing\/x: /);

      // The sandbox user ends every process it can, the standby too: the next write still lands.
      await waitFor(async () => standbys(initPid('fw')).length === 3, 'the standbys refilled');
      await sh(d, 'fw', 'kill -9 -1; true');
      await sleep(50);
      const after = await write('fw', 'path=after-kill', 'still\n');
      assert.equal(after.status, 204, after.text);
      assert.equal((await sh(d, 'fw', 'cat ~/after-kill')).stdout, 'still\n');
    } finally {
      await api(d, 'DELETE', '/v1/sandboxes/fw');
    }
  });

  it('a write right after a restore lands in the restored files, through a standby of the new init', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'fw3' })).status, 201);
    try {
      assert.equal((await write('fw3', 'path=kept', 'kept\n')).status, 204);
      const made = await api(d, 'POST', '/v1/sandboxes/fw3/checkpoint');
      const id = checkpointIdOf(ndjsonLines(made.text));
      assert.equal(typeof id, 'string', made.text);
      assert.equal((await write('fw3', 'path=dropped', 'x\n')).status, 204);
      const before = initPid('fw3');
      await waitFor(async () => standbys(before).length === 3, 'the standby writes in the sandbox');

      // The restore restarts the sandbox; its first standby starts with the new init, before the answer.
      const restored = await api(d, 'POST', `/v1/sandboxes/fw3/checkpoints/${String(id)}/restore`);
      assert.equal(restored.status, 200, restored.text);
      const env = await write('fw3', 'path=.paddock/env&mode=0600&mkdirParents=true', "export A='1'\n");
      assert.equal(env.status, 204, env.text);
      const after = initPid('fw3');
      assert.notEqual(after, before);
      assert.deepEqual(standbys(before), []);
      const r = await sh(d, 'fw3', 'cd ~; stat -c "%a %U" .paddock/env; cat kept .paddock/env; ls dropped');
      assert.equal(r.stdout, "600 sandbox\nkept\nexport A='1'\n", r.stderr);
      assert.equal(r.exitCode, 2);
      await waitFor(async () => standbys(after).length === 3, 'the restored sandbox refills its standbys');
    } finally {
      await api(d, 'DELETE', '/v1/sandboxes/fw3');
    }
  });

  it('leaves no standby behind when the sandbox restarts or sandboxd stops', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'fw2' })).status, 201);
    assert.equal((await write('fw2', 'path=a', 'a\n')).status, 204);
    const first = initPid('fw2');
    await waitFor(async () => standbys(first).length === 3, 'the standby writes in the sandbox');
    // Its init dies: the standby with it, and the sandbox's next start has a standby of its own.
    process.kill(first, 'SIGKILL');
    await waitFor(
      async () => (await api(d, 'GET', '/v1/sandboxes/fw2')).json['status'] === 'stopped',
      'stopped',
    );
    assert.equal((await write('fw2', 'path=b', 'b\n')).status, 204);
    const second = initPid('fw2');
    assert.notEqual(second, first);
    await waitFor(async () => standbys(second).length === 3, 'standbys in the restarted sandbox');
    assert.equal((await sh(d, 'fw2', 'cat ~/a ~/b')).stdout, 'a\nb\n');

    // sandboxd stops; the sandbox keeps running, its standby ends without writing anything.
    await d.stop({ keepData: true });
    try {
      await waitFor(async () => standbys(second).length === 0, 'the standby to end with its sandboxd');
    } finally {
      d = await startTestSandboxd({ dataDir: d.dataDir, token: TOKEN });
    }
    assert.equal((await sh(d, 'fw2', 'ls ~')).stdout, 'a\nb\n');
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/fw2')).status, 204);
  });
});
