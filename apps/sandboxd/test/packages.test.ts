// The `packages` provisioning stage end to end on the default base: the commands of
// apps/server/src/conversations/provisioning/packages.ts run through packages/sandbox-client against a real sandboxd
// (apt as the sandbox's root, npm and pip as the sandbox user), then the sandbox user runs what they
// installed; another sandbox and the host see none of it.
//
// Outside services: the Debian archive and the npm registry are the real ones (this test FAILS, naming them,
// when they cannot be reached); PyPI is not reachable from this machine, so a fake PEP 503 "simple" index,
// speaking the real wire protocol, serves a `six` wheel built here, from a test network namespace (netns.ts)
// that the sandbox reaches by name through the test hosts override.
//
// jq and six are already part of this machine's /usr (Debian's jq, python3-six): so that each manager really
// installs something, the map adds Debian's `hello` (not installed on the host) and pins six to the version
// only the fake index has.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net, { isIP } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { crc32 } from 'node:zlib';
import { createSandboxClient, type SandboxClient } from '../../../packages/sandbox-client/src/index.ts';
import { packageCommands } from '../../server/src/conversations/provisioning/packages.ts';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { createTestNet, type TestNet } from './netns.ts';

const SIX_VERSION = '1.99.0';
const WHEEL = `six-${SIX_VERSION}-py2.py3-none-any.whl`;
const UPSTREAMS = [
  { name: 'the Debian archive', url: 'http://deb.debian.org/debian/dists/bookworm/InRelease' },
  { name: 'the npm registry', url: 'https://registry.npmjs.org/cowsay' },
];

/** A zip archive of stored (uncompressed) entries: enough for a wheel. */
function zip(files: [string, Buffer][]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, data] of files) {
    const n = Buffer.from(name);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(n.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(n.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, n, data);
    centrals.push(central, n);
    offset += 30 + n.length + data.length;
  }
  const dir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dir, end]);
}

/** A real wheel of a tiny `six` (module six.py, dist-info with METADATA, WHEEL and RECORD). */
function sixWheel(): Buffer {
  const info = `six-${SIX_VERSION}.dist-info`;
  const files: [string, Buffer][] = [
    ['six.py', Buffer.from(`__version__ = "${SIX_VERSION}"\nPY3 = True\n`)],
    [`${info}/METADATA`, Buffer.from(`Metadata-Version: 2.1\nName: six\nVersion: ${SIX_VERSION}\n`)],
    [
      `${info}/WHEEL`,
      Buffer.from(
        'Wheel-Version: 1.0\nGenerator: paddock-test\nRoot-Is-Purelib: true\nTag: py2-none-any\nTag: py3-none-any\n',
      ),
    ],
  ];
  const record = files
    .map(([name, data]) => {
      const digest = createHash('sha256').update(data).digest('base64url');
      return `${name},sha256=${digest},${data.length}\n`;
    })
    .join('');
  files.push([`${info}/RECORD`, Buffer.from(`${record}${info}/RECORD,,\n`)]);
  return zip(files);
}

async function reachable(url: string): Promise<string | null> {
  try {
    const res = await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(20_000) });
    return res.status < 500 ? null : `HTTP ${res.status}`;
  } catch (err) {
    return (err as Error).message;
  }
}

// As an ordinary user the daemon is rootless: the host's /usr belongs to host root, which an unprivileged
// user namespace cannot map, so apt cannot install there (docs/sandboxd.md, "System packages"); npm and pip
// install into the sandbox user's ~/.local as in root mode. The fake index is then reached through a
// service route on loopback (SANDBOXD_SERVICE_ROUTES) instead of a test network namespace, which only
// root can join to the machine's own network.
const rootless = process.getuid?.() !== 0;

let tnet: TestNet | undefined;
let d: TestSandboxd | undefined;
let client: SandboxClient;
const indexRequests: string[] = [];
let loopbackIndex: net.Server | undefined;
let pypiPort = 0;

before(async () => {
  // Reachable from this host, or the test fails here, naming the service (never skipped).
  for (const u of UPSTREAMS) {
    const problem = await reachable(u.url);
    assert.equal(problem, null, `${u.name} (${u.url}) cannot be reached from this machine: ${problem}`);
  }
  // Where this machine resolves them: an intercepting mirror may answer from a private or documentation
  // range, which sandboxd refuses unless the operator lists it (SANDBOXD_EGRESS_ALLOW_CIDRS).
  const upstreamIps = new Set<string>();
  for (const u of UPSTREAMS) {
    for (const a of await lookup(new URL(u.url).hostname, { all: true })) {
      if (isIP(a.address) === 4) upstreamIps.add(a.address);
    }
  }
  const wheel = sixWheel();
  const sha = createHash('sha256').update(wheel).digest('hex');
  let server: net.Server;
  if (rootless) {
    server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    pypiPort = (server.address() as net.AddressInfo).port;
    loopbackIndex = server;
  } else {
    tnet = await createTestNet();
    const listening = await tnet.listen();
    server = listening.server;
    pypiPort = listening.port;
  }
  const index = http.createServer((req, res) => {
    indexRequests.push(req.url ?? '');
    if (req.url === '/simple/six/') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<!DOCTYPE html><html><body><a href="/files/${WHEEL}#sha256=${sha}">${WHEEL}</a></body></html>\n`,
      );
    } else if (req.url === `/files/${WHEEL}`) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': wheel.length });
      res.end(wheel);
    } else {
      res.writeHead(404).end();
    }
  });
  server.on('connection', (socket) => index.emit('connection', socket));
  d = rootless
    ? await startTestSandboxd({
        env: {
          SANDBOXD_SERVICE_ROUTES: `pypi.test=127.0.0.1:${pypiPort}`,
          ...(upstreamIps.size > 0 ? { SANDBOXD_EGRESS_ALLOW_CIDRS: [...upstreamIps].join(',') } : {}),
        },
      })
    : await startTestSandboxd({
        hosts: { 'pypi.test': tnet!.ip },
        env: { SANDBOXD_EGRESS_ALLOW_CIDRS: [tnet!.allowEnv, ...upstreamIps].join(',') },
      });
  client = createSandboxClient({ baseUrl: d.url, token: d.token });
  await client.create('pkg-a');
  await client.create('pkg-b');
});

after(async () => {
  for (const name of ['pkg-a', 'pkg-b']) await client?.destroy(name).catch(() => {});
  await d?.stop();
  tnet?.close();
  loopbackIndex?.close();
});

const run = async (name: string, script: string, user?: 'root') => {
  const r = await client.exec(name, {
    cmd: ['sh', '-c', script],
    timeoutMs: 60_000,
    ...(user ? { user } : {}),
  });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
};

describe('packages stage on the default base', () => {
  it('installs apt (as root), npm and pip packages into one sandbox only; the sandbox user runs them', async (t) => {
    const commands = packageCommands({ apt: 'jq hello', npm: 'cowsay', pip: `six==${SIX_VERSION}` });
    assert.deepEqual(
      commands.map((c) => `${c.manager}:${c.user}`),
      ['apt:root', 'apt:root', 'npm:sandbox', 'pip:sandbox'],
    );
    for (const c of commands) {
      if (rootless && c.user === 'root') {
        // Rootless: the sandbox's root cannot change the host's /usr, and says so.
        const r = await client.exec('pkg-a', {
          cmd: c.argv,
          env: c.env,
          user: 'root',
          timeoutMs: c.timeoutMs,
        });
        if (c.argv.includes('install')) {
          assert.notEqual(r.exitCode, 0, 'apt-get install cannot succeed rootless');
        }
        continue;
      }
      const t0 = performance.now();
      const r = await client.exec('pkg-a', {
        cmd: c.argv,
        env: {
          ...c.env,
          PIP_INDEX_URL: `http://pypi.test:${pypiPort}/simple/`,
          PIP_TRUSTED_HOST: 'pypi.test',
        },
        ...(c.user === 'root' ? { user: 'root' as const } : {}),
        timeoutMs: c.timeoutMs,
      });
      const ms = Math.round(performance.now() - t0);
      t.diagnostic(`${c.argv.slice(0, 3).join(' ')}: ${ms} ms`);
      assert.equal(
        r.exitCode,
        0,
        `${c.argv.join(' ')} failed:\n${r.stdout.toString().slice(-2000)}\n${r.stderr.toString().slice(-2000)}`,
      );
    }
    assert.ok(indexRequests.includes(`/files/${WHEEL}`), 'pip fetched the wheel from the index');

    if (rootless) {
      const used = await run(
        'pkg-a',
        'id -un; command -v hello || echo no-hello; cowsay paddock; python3 -c "import six; print(six.__version__)"',
      );
      assert.equal(used.code, 0, used.err);
      const lines = used.out.split('\n');
      assert.equal(lines[0], 'sandbox');
      assert.equal(lines[1], 'no-hello', 'apt installed nothing rootless');
      assert.match(used.out, /< paddock >/);
      assert.equal(lines.at(-2), SIX_VERSION);
      const other = await run(
        'pkg-b',
        'command -v cowsay || echo no-cowsay; python3 -c "import six; print(six.__version__)" 2>/dev/null || echo no-six',
      );
      assert.equal(other.out.split('\n')[0], 'no-cowsay');
      assert.notEqual(other.out.split('\n')[1], SIX_VERSION);
      assert.equal(existsSync('/usr/bin/hello'), false, 'the host has no /usr/bin/hello');
      return;
    }
    const used = await run(
      'pkg-a',
      'id -un; echo \'{"a":1}\' | jq -c .a; hello; cowsay paddock; python3 -c "import six; print(six.__version__)"',
    );
    assert.equal(used.code, 0, used.err);
    const lines = used.out.split('\n');
    assert.equal(lines[0], 'sandbox');
    assert.equal(lines[1], '1');
    assert.equal(lines[2], 'Hello, world!');
    assert.match(used.out, /< paddock >/);
    assert.equal(lines.at(-2), SIX_VERSION);

    // What root installed belongs to the sandbox's root, and the sandbox user cannot change it.
    const owner = await run('pkg-a', 'stat -c %U /usr/bin/hello; touch /usr/bin/hello');
    assert.equal(owner.out, 'root\n');
    assert.match(owner.err, /Permission denied/);

    // Another sandbox of the same daemon has none of it, and neither has the host.
    const other = await run(
      'pkg-b',
      'command -v hello || echo no-hello; command -v cowsay || echo no-cowsay; python3 -c "import six; print(six.__version__)" 2>/dev/null || echo no-six; grep -c "^Package: hello$" /var/lib/dpkg/status',
    );
    assert.deepEqual(other.out.split('\n').slice(0, 2), ['no-hello', 'no-cowsay']);
    assert.notEqual(other.out.split('\n')[2], SIX_VERSION);
    assert.equal(other.out.split('\n')[3], '0');
    assert.equal(existsSync('/usr/bin/hello'), false, 'the host has no /usr/bin/hello');
  });
});

describe("the sandbox root's writable system directories", () => {
  // The attack: the sandbox root replaces the programs the init and sandboxd's helpers run (sleep, setpriv,
  // unshare, mount, umount, ip, cp, hostname, perl, nsenter) by wrappers that record who ran them, then
  // kills the holder of its user namespace, so the sandbox stops and the next exec starts it again over the
  // planted layer. A wrapper run by host root would record an id the sandbox does not map (65534).
  it('never runs a program the sandbox root planted with host privileges, also across a restart', async () => {
    const names = [
      'sleep',
      'setpriv',
      'unshare',
      'mount',
      'umount',
      'ip',
      'cp',
      'hostname',
      'perl',
      'nsenter',
    ];
    if (rootless) {
      // Rootless: the sandbox's root cannot write the host's /usr at all, so nothing can be planted there.
      const refused = await run('pkg-b', 'cp "$(command -v sleep)" /usr/bin/real-sleep', 'root');
      assert.notEqual(refused.code, 0, 'the sandbox root cannot write /usr rootless');
      assert.equal((await run('pkg-b', 'test -e /usr/bin/real-sleep || echo absent')).out, 'absent\n');
      return;
    }
    const plant = await run(
      'pkg-b',
      `set -e; touch /tmp/planted-ran; chmod 666 /tmp/planted-ran; for n in ${names.join(' ')}; do
         p=$(command -v $n); cp "$p" "/usr/bin/real-$n"
         printf '#!/bin/sh\\nid -u >> /tmp/planted-ran\\nexec /usr/bin/real-%s "$@"\\n' $n > "$p"; chmod 755 "$p"
       done; sleep 0.01; cat /tmp/planted-ran`,
      'root',
    );
    assert.equal(plant.code, 0, plant.err);
    // The planted sleep (and cp, once replaced, in the loop) ran, as the sandbox root.
    assert.match(plant.out, /^(0\n)+$/, plant.out);
    const startOf = async () => (await run('pkg-b', 'cut -d" " -f22 /proc/1/stat')).out.trim();
    const before = await startOf();
    // Kill the holder (the sandbox root has its host uid): pid 1 ends, and with it the sandbox.
    await run(
      'pkg-b',
      'for p in /proc/[0-9]*; do [ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" = "sleep infinity " ] && kill -9 ${p#/proc/}; done; sleep 1',
      'root',
    ).catch(() => undefined);
    let after = before;
    for (let i = 0; i < 50 && after === before; i++) {
      after = await startOf().catch(() => before);
      if (after === before) await new Promise((r) => setTimeout(r, 200));
    }
    assert.notEqual(after, before, 'the sandbox was started again');
    const ran = await run('pkg-b', 'sleep 0.01; cat /tmp/planted-ran');
    assert.equal(ran.code, 0, ran.err);
    const ids = new Set(ran.out.trim().split('\n'));
    assert.deepEqual([...ids].sort(), ['0', '1000'], `planted programs ran as: ${ran.out}`);
  });
});
