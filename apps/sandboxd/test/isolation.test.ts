import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, collect, openExec, sh, waitFor } from './helpers.ts';

let d: TestSandboxd;
let hostServer: http.Server;
let hostPort = 0;

before(async () => {
  hostServer = http.createServer((_req, res) => res.end('host secret'));
  await new Promise<void>((r) => hostServer.listen(0, '127.0.0.1', () => r()));
  hostPort = (hostServer.address() as AddressInfo).port;
  d = await startTestSandboxd();
  for (const name of ['iso-a', 'iso-b'])
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
});
after(async () => {
  for (const name of ['iso-a', 'iso-b']) await api(d, 'DELETE', `/v1/sandboxes/${name}`);
  await d.stop();
  hostServer.close();
});

describe('isolation', () => {
  it('cannot read host secrets, the project or the data directory', async () => {
    const r = await sh(
      d,
      'iso-a',
      `cat /etc/shadow; ls /work/main; ls ${d.dataDir}; ls ${process.cwd()}; ls -A /home /root; echo done`,
    );
    assert.match(r.stderr, /\/etc\/shadow: No such file/);
    assert.match(r.stderr, /\/work\/main.*No such file/);
    assert.ok(
      r.stderr.includes(`${d.dataDir}': No such file`) || r.stderr.includes(`${d.dataDir}: No such file`),
      r.stderr,
    );
    assert.match(r.stdout, /^\/home:\nsandbox\n/);
    assert.doesNotMatch(r.stdout, /node_modules|package\.json|tenants/);
  });

  it('sees only its own processes and cannot signal host processes', async () => {
    const r = await sh(
      d,
      'iso-a',
      `ps -eo pid=,args=; kill -0 ${process.pid} && echo signalled || echo no-such`,
    );
    const lines = r.stdout.trim().split('\n');
    // pid 1 is the init's shell, its script in its environment (runtime/namespaces.ts): no host path.
    assert.match(lines[0]!, /^\s*1 \S*\/sh -c eval "\$SBX_INIT" sandbox-init$/);
    assert.ok(lines.length < 12, r.stdout);
    assert.doesNotMatch(r.stdout, /node|sandboxd|--test/);
    assert.match(r.stdout, /no-such/);
  });

  it('cannot escape through /proc/1/root or remount the read-only base', async () => {
    const r = await sh(
      d,
      'iso-a',
      'ls /proc/1/root/; cat /proc/1/environ; touch /usr/bin/evil; mount -o remount,rw /usr; unshare -r mount -o remount,rw /usr; echo x > /proc/sys/kernel/hostname; echo end',
    );
    assert.match(r.stderr, /\/proc\/1\/root\/.*Permission denied/);
    assert.match(r.stderr, /\/proc\/1\/environ: Permission denied/);
    assert.match(r.stderr, /\/usr\/bin\/evil.*Permission denied/);
    assert.match(r.stderr, /hostname: Permission denied/);
    assert.equal((await sh(d, 'iso-a', 'ls /usr/bin/evil')).exitCode, 2);
  });

  it('cannot reach a host loopback server or another sandbox directly', async () => {
    const direct = await sh(
      d,
      'iso-a',
      `curl -sS -m 3 --noproxy '*' http://127.0.0.1:${hostPort}/; echo rc=$?`,
    );
    assert.match(direct.stdout, /rc=7/);
    assert.doesNotMatch(direct.stdout, /host secret/);

    const server =
      "require('http').createServer((q,s)=>s.end('from b')).listen(8099,'127.0.0.1',()=>console.log('listening'))";
    const ws = openExec(d, 'iso-b', ['node', '-e', server], { detachable: true });
    let out = '';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary && data[0] === 1) out += data.subarray(1).toString();
    });
    const done = collect(ws, false, 20_000);
    await waitFor(() => out.includes('listening'), 'server in sandbox b');
    assert.match(
      (await sh(d, 'iso-b', "curl -sS -m 3 --noproxy '*' http://127.0.0.1:8099/")).stdout,
      /from b/,
    );
    const fromA = await sh(d, 'iso-a', "curl -sS -m 3 --noproxy '*' http://127.0.0.1:8099/; echo rc=$?");
    assert.match(fromA.stdout, /rc=7/);
    ws.terminate();
    await done;
  });

  it('gives each sandbox its own writable layer', async () => {
    await sh(d, 'iso-a', 'echo mine > /tmp/owned-by-a && mkdir -p ~/.local/bin');
    assert.equal((await sh(d, 'iso-b', 'cat /tmp/owned-by-a')).exitCode, 1);
    assert.equal((await sh(d, 'iso-a', 'cat /tmp/owned-by-a')).stdout, 'mine\n');
  });
});

describe('resource limits', () => {
  let small: TestSandboxd;
  before(async () => {
    small = await startTestSandboxd({
      env: { SANDBOXD_MEMORY_MAX: '192m', SANDBOXD_PIDS_MAX: '64', SANDBOXD_CPUS: '1' },
    });
    assert.equal((await api(small, 'POST', '/v1/sandboxes', { name: 'limited' })).status, 201);
  });
  after(async () => {
    await api(small, 'DELETE', '/v1/sandboxes/limited');
    await small.stop();
  });

  it('contains a memory hog and a bounded fork bomb when cgroups are writable, or reports limits unavailable', async () => {
    const info = await api(small, 'GET', '/v1/sandboxes/limited');
    const limits = info.json['limits'] as {
      cgroup: string | null;
      memory_bytes: number | null;
      pids_max: number | null;
    };
    if (limits.cgroup === null) {
      // No writable cgroup tree on this machine: the API must say so rather than pretend.
      assert.equal(limits.memory_bytes, null);
      assert.equal(limits.pids_max, null);
      assert.ok(small.logs().some((l) => l.includes('limits are NOT enforced')));
      return;
    }
    assert.equal(limits.memory_bytes, 192 * 1024 * 1024);
    assert.equal(limits.pids_max, 64);

    const hog = await sh(small, 'limited', "node -e 'const a=[]; for(;;) a.push(Buffer.alloc(1<<20, 1))'", {
      timeoutMs: 60_000,
    });
    assert.equal(hog.exitCode, 137, `memory hog should be OOM-killed: ${hog.stderr.slice(-300)}`);

    const bomb = await sh(
      small,
      'limited',
      'i=0; while [ $i -lt 200 ]; do sleep 3 & i=$((i+1)); done; echo spawned; ps -e --no-headers | wc -l',
      {
        timeoutMs: 60_000,
      },
    );
    assert.match(bomb.stderr, /fork|Resource temporarily unavailable|Cannot/i);
    assert.ok(Number(bomb.stdout.trim().split('\n').at(-1)) <= 64, bomb.stdout);

    // The host and the daemon are fine, and the sandbox recovers once the bomb is gone.
    assert.equal((await fetch(`${small.url}/health`)).status, 200);
    await waitFor(
      async () => (await sh(small, 'limited', 'echo alive')).stdout === 'alive\n',
      'sandbox usable again',
      20_000,
    );
  });
});
