import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { HOST_PATH } from '../src/config.ts';
import { resolveHostTools } from '../src/runtime/host-tools.ts';
import { checkPerlListener, listenHelper, receiveListener } from '../src/runtime/namespaces.ts';
import { startTestSandboxd } from './harness.ts';
import { api, sh } from './helpers.ts';

// Both proxy listen helpers, run here in the test's own network namespace (sandboxd runs them through
// nsenter --net in a sandbox's; egress.test.ts covers that end to end): each hands sandboxd a listening
// socket that node adopts as a net.Server, or exits with the reason and hands nothing.

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const perl = resolveHostTools(HOST_PATH).perl;
const helpers: [string, string[]][] = [['node', listenHelper(null)]];
if (perl && (process.arch === 'x64' || process.arch === 'arm64')) helpers.push(['perl', listenHelper(perl)]);

describe('proxy listen helpers', () => {
  it('the host has perl, so sandboxd uses the perl helper here', () => {
    // sandboxd falls back to node without perl; on this project's machines perl is there (perl-base).
    assert.ok(perl, 'perl on HOST_PATH');
    assert.equal(listenHelper(perl)[0], perl);
    assert.equal(listenHelper(null)[0], process.execPath);
  });

  it('checks the perl helper once against this node: it works here; a failing one leaves node in use, with the reason', async () => {
    assert.deepEqual(await checkPerlListener(perl), { perl });
    assert.deepEqual(await checkPerlListener(null), { perl: null, reason: 'no perl on PATH' });
    // A "perl" that hands nothing over (as the helper would if node's IPC form changed).
    const broken = await checkPerlListener('/bin/true');
    assert.equal(broken.perl, null);
    assert.match(broken.reason ?? '', /exited \(0\) without a listener/);
    const missing = await checkPerlListener('/nonexistent/perl');
    assert.equal(missing.perl, null);
    assert.match(missing.reason ?? '', /could not be started: .*ENOENT/);
  });

  it('a sandboxd whose perl fails the check starts sandboxes with the node helper, and says so', async () => {
    // First on sandboxd's PATH (where host helpers are looked up): a "perl" that hands nothing over.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'paddock-fake-perl-'));
    writeFileSync(path.join(dir, 'perl'), '#!/bin/sh\nexit 0\n');
    chmodSync(path.join(dir, 'perl'), 0o755);
    chmodSync(dir, 0o755);
    const d = await startTestSandboxd({ env: { PATH: `${dir}:${process.env['PATH'] ?? HOST_PATH}` } });
    try {
      assert.ok(
        d
          .logs()
          .some(
            (l) => l.includes('the perl proxy listen helper failed its check') && l.includes('exited (0)'),
          ),
        d.logs().join('\n'),
      );
      assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'lh-node' })).status, 201);
      // An exec starts only once the proxy listener is open (sandboxes.service.ts).
      const r = await sh(d, 'lh-node', 'echo "$HTTP_PROXY"');
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /127\.0\.0\.1:\d+/);
      await api(d, 'DELETE', '/v1/sandboxes/lh-node');
    } finally {
      await d.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [name, argv] of helpers) {
    it(`${name}: hands over a listener on 127.0.0.1 that accepts connections`, async () => {
      const port = await freePort();
      // The handshake sandboxd itself uses (receiveListener): it rejects with the reason when nothing came.
      const server = await receiveListener(argv, port, 10_000);
      try {
        assert.deepEqual(server.address(), { address: '127.0.0.1', family: 'IPv4', port });
        server.on('connection', (s: net.Socket) => s.end('proxied\n'));
        for (let i = 0; i < 3; i++) {
          const got = await new Promise<string>((resolve, reject) => {
            let buf = '';
            const c = net.connect(port, '127.0.0.1');
            c.on('data', (d: Buffer) => {
              buf += d.toString();
            });
            c.on('end', () => resolve(buf));
            c.on('error', reject);
          });
          assert.equal(got, 'proxied\n');
        }
      } finally {
        await new Promise<void>((r) => server.close(() => r()));
      }
    });

    it(`${name}: a port already taken is a failure with its reason, and no listener`, async () => {
      const taken = net.createServer();
      await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
      const { port } = taken.address() as net.AddressInfo;
      try {
        // No listener, a non-zero exit, and the helper's own reason.
        await assert.rejects(receiveListener(argv, port, 10_000), (err: Error) => {
          assert.match(
            err.message,
            /exited \((?!0\))\d+\) without a listener: .*listen failed: .*(in use|EADDRINUSE)/is,
          );
          return true;
        });
      } finally {
        await new Promise<void>((r) => taken.close(() => r()));
      }
    });
  }
});
