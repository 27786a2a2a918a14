import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, checkpointIdOf, collect, ndjsonLines, openExec, sh, waitFor } from './helpers.ts';
import { createTestNet, type TestNet } from './netns.ts';

// Every server here listens in a test network namespace (netns.ts: a private address that is not the host's,
// opened with SANDBOXD_EGRESS_ALLOW_CIDRS) and is reached from the sandbox only through sandboxd's proxy, by
// test host names mapped to it with the test-only hosts override (SANDBOXD_HOSTS_FILE).
let d: TestSandboxd;
let tnet: TestNet;
let web: http.Server;
let echo: net.Server;
let webPort = 0;
let echoPort = 0;
const SB = 'egress-tests';

before(async () => {
  tnet = await createTestNet();
  web = http.createServer((req, res) => res.end(`hello ${req.headers.host}`));
  echo = net.createServer((s) => s.pipe(s));
  const w = await tnet.listen();
  w.server.on('connection', (s) => web.emit('connection', s));
  webPort = w.port;
  const e = await tnet.listen();
  e.server.on('connection', (s) => echo.emit('connection', s));
  echoPort = e.port;
  d = await startTestSandboxd({
    net: tnet,
    hosts: { 'allowed.test': tnet.ip, 'denied.test': tnet.ip, 'tunnel.test': tnet.ip },
    env: { SANDBOXD_EGRESS_ALLOW_CIDRS: tnet.allowEnv },
  });
  assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: SB })).status, 201);
});
after(async () => {
  await api(d, 'DELETE', `/v1/sandboxes/${SB}`);
  await d.stop();
  web.closeAllConnections();
  tnet.close();
});

const policy = async (rules: unknown[]) => {
  const r = await api(d, 'POST', `/v1/sandboxes/${SB}/policy/network`, { rules });
  assert.equal(r.status, 204);
  assert.equal(r.text, '');
};
const curl = (url: string, extra = '') =>
  sh(d, SB, `curl -sS -m 5 ${extra} -w ' %{http_code}' ${url}; echo " rc=$?"`);

describe('egress', () => {
  it('has no network interface but loopback and cannot reach a server directly', async () => {
    const ifaces = await sh(d, SB, 'ls /sys/class/net 2>/dev/null; cat /proc/net/dev');
    assert.doesNotMatch(ifaces.stdout, /eth|ens|enp|wl|veth|docker|pdk/);
    const direct = await curl(`http://${tnet.ip}:${webPort}/`, '--noproxy "*"');
    assert.match(direct.stdout, /rc=7/);
    assert.doesNotMatch(direct.stdout, /hello/);
  });

  it('reaches any host name through the proxy when the rules are empty, but never local addresses', async () => {
    await policy([]);
    const ok = await curl(`http://allowed.test:${webPort}/`);
    assert.match(ok.stdout, new RegExp(`hello allowed.test:${webPort} 200 rc=0`));
    const loop = await curl(`http://127.0.0.1:${webPort}/`, '--noproxy "" -x http://127.0.0.1:3128');
    assert.match(loop.stdout, / 403 rc=0/);
  });

  it('enforces allow rules by host name over HTTP, CONNECT and SOCKS5', async () => {
    await policy([{ domain: 'allowed.test', action: 'allow' }]);
    assert.match((await curl(`http://allowed.test:${webPort}/`)).stdout, / 200 rc=0/);
    assert.match((await curl(`http://denied.test:${webPort}/`)).stdout, / 403 rc=0/);
    // CONNECT (what https uses): curl -p tunnels plain http through CONNECT.
    assert.match(
      (await curl(`http://allowed.test:${webPort}/`, '-p')).stdout,
      /hello allowed.test.* 200 rc=0/,
    );
    assert.match((await curl(`http://denied.test:${webPort}/`, '-p')).stdout, /rc=56/);
    // SOCKS5 with proxy-side name resolution.
    assert.match(
      (await curl(`http://allowed.test:${webPort}/`, '--socks5-hostname 127.0.0.1:3128')).stdout,
      / 200 rc=0/,
    );
    assert.match(
      (await curl(`http://denied.test:${webPort}/`, '--socks5-hostname 127.0.0.1:3128')).stdout,
      /rc=97/,
    );
  });

  it('says why in the status line of a refusal, which is what tools print (npm, pip, apt)', async () => {
    await policy([{ domain: 'allowed.test', action: 'allow' }]);
    // A forwarded request (curl -i prints the status line) and a CONNECT (curl -v shows its answer).
    const forward = await sh(d, SB, `curl -sS -m 5 -i http://denied.test:${webPort}/ | head -1`);
    assert.equal(
      forward.stdout.trim(),
      'HTTP/1.1 403 Forbidden (egress to denied.test is denied by the sandbox network policy)',
    );
    const tunnel = await sh(
      d,
      SB,
      `curl -sS -m 5 -v -p http://denied.test:${webPort}/ 2>&1 | grep '^< HTTP'`,
    );
    assert.equal(
      tunnel.stdout.trim(),
      '< HTTP/1.1 403 Forbidden (egress to denied.test is denied by the sandbox network policy)',
    );
    await policy([]);
    const local = await sh(
      d,
      SB,
      `curl -sS -m 5 -i --noproxy "" -x http://127.0.0.1:3128 http://127.0.0.1:${webPort}/ | head -1`,
    );
    assert.equal(
      local.stdout.trim(),
      'HTTP/1.1 403 Forbidden (egress to 127.0.0.1 is refused: not a public address)',
    );
  });

  it('refuses everything for a limited environment (single * deny) and literal IPs while enforcing', async () => {
    await policy([{ domain: '*', action: 'deny' }]);
    assert.match((await curl(`http://allowed.test:${webPort}/`)).stdout, / 403 rc=0/);
    await policy([{ domain: '*', action: 'allow' }]);
    assert.match((await curl(`http://allowed.test:${webPort}/`)).stdout, / 200 rc=0/);
    assert.match(
      (await curl(`http://10.0.0.1:${webPort}/`, '--noproxy "" -x http://127.0.0.1:3128')).stdout,
      / 403 rc=0/,
    );
  });

  it('applies include: "defaults" (test hosts are not in the preset)', async () => {
    await policy([{ domain: '*', action: 'deny', include: 'defaults' }]);
    assert.match((await curl(`http://allowed.test:${webPort}/`)).stdout, / 403 rc=0/);
    await policy([
      { domain: '*', action: 'deny', include: 'defaults' },
      { domain: '*.test', action: 'allow' },
    ]);
    assert.match((await curl(`http://allowed.test:${webPort}/`)).stdout, / 200 rc=0/);
    const got = await api(d, 'GET', `/v1/sandboxes/${SB}/policy/network`);
    assert.equal((got.json['rules'] as unknown[]).length, 2);
  });

  it('closes open tunnels to a host that a policy change denies', async () => {
    await policy([{ domain: 'tunnel.test', action: 'allow' }]);
    const script = `
      const net = require('net');
      const s = net.connect(3128, '127.0.0.1', () => s.write('CONNECT tunnel.test:${echoPort} HTTP/1.1\\r\\nHost: tunnel.test\\r\\n\\r\\n'));
      let buf = '';
      s.on('data', (d) => {
        buf += d;
        if (buf.includes('200 Connection Established') && !buf.includes('ping')) { console.log('open'); s.write('ping'); }
        else if (buf.endsWith('ping')) console.log('echoed');
      });
      s.on('close', () => { console.log('closed'); process.exit(0); });
      setTimeout(() => { console.log('still open'); process.exit(1); }, 15000);
    `;
    assert.equal(
      (await api(d, 'PUT', `/v1/sandboxes/${SB}/fs/write?path=tunnel.js`, new TextEncoder().encode(script)))
        .status,
      204,
    );
    const ws = openExec(d, SB, ['node', 'tunnel.js']);
    const done = collect(ws, false, 30_000);
    let out = '';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) out += data.subarray(1).toString();
    });
    await waitFor(() => out.includes('echoed'), 'tunnel open and echoing');
    await policy([{ domain: 'other.test', action: 'allow' }]);
    const r = await done;
    assert.match(r.stdout, /open\nechoed\nclosed\n/);
    assert.equal(r.exitCode, 0);
  });

  it('validates policy bodies and answers 404 for an unknown sandbox', async () => {
    assert.equal(
      (
        await api(d, 'POST', `/v1/sandboxes/${SB}/policy/network`, {
          rules: [{ domain: 'x', action: 'perhaps' }],
        })
      ).status,
      400,
    );
    assert.equal((await api(d, 'POST', '/v1/sandboxes/nope/policy/network', { rules: [] })).status, 404);
  });

  it('a restore answers before the proxy listener is open; a write and an exec right after it work', async () => {
    const made = await api(d, 'POST', `/v1/sandboxes/${SB}/checkpoint`);
    const id = checkpointIdOf(ndjsonLines(made.text));
    assert.equal(typeof id, 'string', made.text);
    const name = 'egress-restored';
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
    try {
      // Each restore restarts the sandbox, and its listener is opened again: an exec right after the answer
      // connects to it first thing, and a write follows.
      for (let round = 0; round < 5; round++) {
        const restored = await api(d, 'POST', `/v1/sandboxes/${name}/checkpoints/${String(id)}/restore`);
        assert.equal(restored.status, 200, restored.text);
        const r = await collect(
          openExec(d, name, [
            'curl',
            '-sS',
            '-m',
            '5',
            '-w',
            ' %{http_code}',
            `http://allowed.test:${webPort}/`,
          ]),
          false,
          30_000,
        );
        assert.equal(r.stdout, `hello allowed.test:${webPort} 200`, r.stderr);
        const w = await api(
          d,
          'PUT',
          `/v1/sandboxes/${name}/fs/write?path=round`,
          new TextEncoder().encode(`${round}`),
        );
        assert.equal(w.status, 204, w.text);
        assert.equal((await sh(d, name, 'cat round')).stdout, `${round}`);
      }
    } finally {
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
    }
  });
});
