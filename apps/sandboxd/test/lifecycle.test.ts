import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, ndjsonLines, openExec, sh, waitFor } from './helpers.ts';

let d: TestSandboxd;
before(async () => {
  d = await startTestSandboxd({ token: 'lifecycle-token-a,lifecycle-token-b' });
  d.token = 'lifecycle-token-a';
});
after(async () => {
  await d.stop();
});

describe('lifecycle', () => {
  it('requires the bearer token on every call', async () => {
    assert.equal((await fetch(`${d.url}/v1/sandboxes`)).status, 401);
    const bad = await api({ url: d.url, token: 'nope' }, 'GET', '/v1/sandboxes');
    assert.equal(bad.status, 401);
    assert.deepEqual(Object.keys(bad.json).sort(), ['error', 'message']);
    assert.equal(bad.json['error'], 'unauthorized');
  });

  it('creates (201), refuses a duplicate (409), gets, and destroys (204, then 404)', async () => {
    const c = await api(d, 'POST', '/v1/sandboxes', { name: 'life-1' });
    assert.equal(c.status, 201);
    assert.equal(c.json['name'], 'life-1');
    assert.ok(typeof c.json['created_at'] === 'string' && typeof c.json['status'] === 'string');
    const dup = await api(d, 'POST', '/v1/sandboxes', { name: 'life-1' });
    assert.equal(dup.status, 409);
    assert.equal(dup.json['error'], 'sandbox_exists');
    assert.equal((await api(d, 'GET', '/v1/sandboxes/life-1')).status, 200);
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/life-1')).status, 204);
    assert.equal((await api(d, 'GET', '/v1/sandboxes/life-1')).status, 404);
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/life-1')).status, 404);
    assert.equal((await api(d, 'GET', '/v1/sandboxes/never-existed')).json['error'], 'sandbox_not_found');
  });

  it('answers create before the setup, reports it as starting, and exec waits for it', async () => {
    const c = await api(d, 'POST', '/v1/sandboxes', { name: 'eager' });
    assert.equal(c.status, 201);
    assert.equal(c.json['status'], 'starting');
    try {
      // Right after create: the exec waits for the setup (filesystem, namespaces, proxy listener).
      const r = await sh(d, 'eager', 'id -un; echo $HTTP_PROXY; cat /etc/hostname');
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.stdout, 'sandbox\nhttp://127.0.0.1:3128\nsandbox\n');
      assert.equal((await api(d, 'GET', '/v1/sandboxes/eager')).json['status'], 'running');
      // The record is on disk (written and fsync'ed before the create answered).
      const tenants = readdirSync(path.join(d.dataDir, 'tenants'));
      assert.ok(
        tenants.some((t) =>
          existsSync(path.join(d.dataDir, 'tenants', t, 'sandboxes', 'eager', 'sandbox.json')),
        ),
      );
    } finally {
      assert.equal((await api(d, 'DELETE', '/v1/sandboxes/eager')).status, 204);
    }
  });

  it('surfaces a failed background setup: status failed, exec and writes answer 503 with the reason', async () => {
    // A production rootfs that disappears after boot makes every sandbox start fail (overlay mount).
    const rootfs = mkdtempSync(path.join(os.tmpdir(), 'sandboxd-rootfs-'));
    const f = await startTestSandboxd({ env: { SANDBOXD_ROOTFS: rootfs } });
    try {
      rmSync(rootfs, { recursive: true, force: true });
      const c = await api(f, 'POST', '/v1/sandboxes', { name: 'doomed' });
      assert.equal(c.status, 201);
      const got = await waitFor(async () => {
        const g = await api(f, 'GET', '/v1/sandboxes/doomed');
        return g.json['status'] === 'failed' ? g : null;
      }, 'status failed');
      assert.match(String(got.json['error']), /sandbox init failed/);
      const rejected = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const ws = openExec(f, 'doomed', ['true']);
        ws.on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => {
            body += chunk.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.on('open', () => reject(new Error('exec on a failed sandbox was accepted')));
        ws.on('error', () => {});
      });
      assert.equal(rejected.status, 503);
      const body = JSON.parse(rejected.body) as { error: string; message: string };
      assert.equal(body.error, 'sandbox_unavailable');
      assert.match(body.message, /"doomed" could not be started: sandbox init failed/);
      const w = await api(f, 'PUT', '/v1/sandboxes/doomed/fs/write?path=x', new TextEncoder().encode('x'));
      assert.equal(w.status, 503);
      assert.equal((await api(f, 'GET', '/v1/sandboxes/doomed')).json['status'], 'failed');
      assert.equal((await api(f, 'DELETE', '/v1/sandboxes/doomed')).status, 204);
    } finally {
      await f.stop();
      rmSync(rootfs, { recursive: true, force: true });
    }
  });

  it('validates names and bodies (400)', async () => {
    for (const body of [{}, { name: '' }, { name: '../x' }, { name: 'a/b' }, { name: 'x'.repeat(64) }]) {
      assert.equal((await api(d, 'POST', '/v1/sandboxes', body)).status, 400, JSON.stringify(body));
    }
    const raw = await fetch(`${d.url}/v1/sandboxes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${d.token}` },
      body: '{nope',
    });
    assert.equal(raw.status, 400);
  });

  it('scopes names per token', async () => {
    const other = { url: d.url, token: 'lifecycle-token-b' };
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'shared-name' })).status, 201);
    assert.equal((await api(other, 'GET', '/v1/sandboxes/shared-name')).status, 404);
    assert.equal((await api(other, 'POST', '/v1/sandboxes', { name: 'shared-name' })).status, 201);
    await sh(d, 'shared-name', 'echo a > ~/who');
    assert.equal((await sh(other, 'shared-name', 'cat ~/who')).exitCode, 1);
    assert.equal((await api(other, 'DELETE', '/v1/sandboxes/shared-name')).status, 204);
    assert.equal((await api(d, 'GET', '/v1/sandboxes/shared-name')).status, 200);
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/shared-name')).status, 204);
  });

  it('pages the list at 50 with continuation tokens', async () => {
    const names = Array.from({ length: 57 }, (_, i) => `page-${String(i).padStart(3, '0')}`);
    const t0 = performance.now();
    for (const name of names) assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
    const perCreate = (performance.now() - t0) / names.length;
    try {
      const seen: string[] = [];
      let token: string | null = null;
      let pages = 0;
      do {
        const q: string = token ? `?continuation_token=${encodeURIComponent(token)}` : '';
        const r = await api(d, 'GET', `/v1/sandboxes${q}`);
        assert.equal(r.status, 200);
        const page = r.json['sandboxes'] as { name: string }[];
        assert.ok(page.length <= 50);
        seen.push(...page.map((s) => s.name));
        token = r.json['has_more'] ? (r.json['next_continuation_token'] as string) : null;
        if (!r.json['has_more']) assert.equal(r.json['next_continuation_token'], null);
        pages++;
      } while (token && pages < 10);
      assert.equal(pages, 2);
      assert.deepEqual(
        seen.filter((n) => n.startsWith('page-')),
        names,
      );
      assert.ok(perCreate < 1000, `create took ${perCreate.toFixed(1)} ms on average`);
    } finally {
      for (const name of names) await api(d, 'DELETE', `/v1/sandboxes/${name}`);
    }
    assert.equal(((await api(d, 'GET', '/v1/sandboxes')).json['sandboxes'] as unknown[]).length, 0);
  });

  it('writes files with mode, parents and the sandbox user as owner', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'writer' })).status, 201);
    try {
      const body = new TextEncoder().encode('secret-ish\n');
      const w = await api(
        d,
        'PUT',
        '/v1/sandboxes/writer/fs/write?path=conf/app.env&workingDir=/home/sandbox/proj&mode=0600&mkdirParents=true',
        body,
      );
      assert.equal(w.status, 204, w.text);
      const r = await sh(
        d,
        'writer',
        'stat -c "%a %U %G" /home/sandbox/proj/conf/app.env; cat /home/sandbox/proj/conf/app.env',
      );
      assert.equal(r.stdout, '600 sandbox sandbox\nsecret-ish\n');
      const noParent = await api(
        d,
        'PUT',
        '/v1/sandboxes/writer/fs/write?path=/home/sandbox/missing/x',
        body,
      );
      assert.equal(noParent.status, 400);
      // A file the sandbox user does not own. Rootless (the tests run without root), every file of the base
      // appears owned by `sandbox` (one host uid; docs/sandboxd.md "Rootless"), so its own copy of /etc/passwd
      // is writable there; the host's /usr (owned by an unmapped uid) is refused in both modes.
      const refused = process.getuid?.() === 0 ? ['/etc/passwd', '/usr/bin/evil'] : ['/usr/bin/evil'];
      for (const p of refused) {
        const denied = await api(d, 'PUT', `/v1/sandboxes/writer/fs/write?path=${p}`, body);
        assert.equal(denied.status, 400, `${p}: ${denied.text}`);
        assert.match(String(denied.json['message']), /Permission denied/);
      }
      assert.equal((await api(d, 'PUT', '/v1/sandboxes/writer/fs/write?path=x&mode=999', body)).status, 400);
      assert.equal((await api(d, 'PUT', '/v1/sandboxes/nope/fs/write?path=x', body)).status, 404);
    } finally {
      await api(d, 'DELETE', '/v1/sandboxes/writer');
    }
  });

  it('keeps sandboxes, their files and checkpoints across a sandboxd restart', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'survivor' })).status, 201);
    await sh(d, 'survivor', 'echo before-restart > ~/state');
    const ck = ndjsonLines((await api(d, 'POST', '/v1/sandboxes/survivor/checkpoint')).text);
    const id = ck.find((l) => l['checkpoint_id'])?.['checkpoint_id'] as string;
    assert.ok(id);
    // Started after the checkpoint: without a cgroup freezer (rootless as an ordinary user) a checkpoint ends
    // the sandbox's processes (docs/sandboxd.md "Checkpoints"); the restart must not.
    await sh(d, 'survivor', 'nohup sleep 300 >/dev/null 2>&1 &');
    await api(d, 'POST', '/v1/sandboxes/survivor/policy/network', {
      rules: [{ domain: '*', action: 'deny' }],
    });

    await d.stop({ keepData: true });
    d = await startTestSandboxd({ dataDir: d.dataDir, token: 'lifecycle-token-a,lifecycle-token-b' });
    d.token = 'lifecycle-token-a';

    const got = await api(d, 'GET', '/v1/sandboxes/survivor');
    assert.equal(got.status, 200);
    assert.deepEqual(got.json['network_policy'], { rules: [{ domain: '*', action: 'deny' }] });
    const r = await sh(d, 'survivor', 'cat ~/state; ps -eo args= | grep -cx "sleep 300"');
    assert.equal(r.stdout, 'before-restart\n1\n', 'files and background processes survive');
    const cks = await api(d, 'GET', '/v1/sandboxes/survivor/checkpoints');
    assert.ok((cks.json['checkpoints'] as { id: string }[]).some((c) => c.id === id));
    const restore = ndjsonLines(
      (await api(d, 'POST', `/v1/sandboxes/survivor/checkpoints/${id}/restore`)).text,
    );
    assert.ok(!restore.some((l) => l['type'] === 'error'), JSON.stringify(restore));
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/survivor')).status, 204);
  });

  it('starts a sandbox again on demand when its init died', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'phoenix' })).status, 201);
    await sh(d, 'phoenix', 'echo kept > ~/f');
    const { readFileSync } = await import('node:fs');
    const dirs = (await import('node:fs')).readdirSync(`${d.dataDir}/tenants`);
    let pid = 0;
    for (const t of dirs) {
      try {
        pid = (
          JSON.parse(readFileSync(`${d.dataDir}/tenants/${t}/sandboxes/phoenix/sandbox.json`, 'utf8')) as {
            init: { pid: number };
          }
        ).init.pid;
      } catch {}
    }
    assert.ok(pid > 0);
    process.kill(pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await api(d, 'GET', '/v1/sandboxes/phoenix')).json['status'], 'stopped');
    assert.equal((await sh(d, 'phoenix', 'cat ~/f')).stdout, 'kept\n');
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/phoenix')).status, 204);
  });
});
