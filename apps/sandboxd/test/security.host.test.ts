/**
 * Host-side hardening (issue 12: findings 1, 2, 8, 9, 12; issue 8 item 6), root mode. Each finding is
 * performed as the attack and must fail; rootless.test.ts repeats the ones that apply there.
 *
 * Run as an ordinary user, the daemon here is rootless: the per-sandbox host identities (root only) are then
 * replaced by what a rootless daemon documents instead (docs/sandboxd.md, "Differences and limits"): its
 * sandboxes share its uid, and stay apart by their namespaces.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { DEFAULTS, HOST_PATH, ID_RANGE, loadConfig } from '../src/config.ts';
import { startSandboxd } from '../src/index.ts';
import { ensureBase, sandboxIds } from '../src/runtime/base.ts';
import { resolveHostTools } from '../src/runtime/host-tools.ts';
import { assertNoSubidOverlap } from '../src/runtime/id-ranges.ts';
import { EXEC_MODES, initPid, pathPlant, preloadPlant, sandboxDir, sandboxLayer } from './attacks.ts';
import { daemonCgroupParents, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, collect, exec, openExec, sh, waitFor } from './helpers.ts';

const SYSCALLS: Record<string, { inotifyInit1: number; addKey: number }> = {
  x64: { inotifyInit1: 294, addKey: 248 },
  arm64: { inotifyInit1: 26, addKey: 217 },
};
const NR = SYSCALLS[process.arch];
const ROOTLESS = process.getuid?.() !== 0;

let d: TestSandboxd;
before(async () => {
  d = await startTestSandboxd();
  for (const name of ['sec-a', 'sec-b'])
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
});
after(async () => {
  for (const name of ['sec-a', 'sec-b']) await api(d, 'DELETE', `/v1/sandboxes/${name}`);
  await d.stop();
});

describe('exec env never reaches the host (finding 1, finding 12 PATH)', () => {
  it('runs no planted program on the host when the exec PATH starts with the upper layer', async () => {
    const { fired, outputs } = await pathPlant(d, 'sec-a');
    assert.deepEqual(fired, [], `planted programs ran on the host in: ${fired.join(', ')}`);
    for (const o of outputs) assert.match(o, /: 0 1000$/, outputs.join('\n'));
  });

  it('loads no planted LD_PRELOAD object on the host; inside, the variable applies to the command', async () => {
    const { fired, inside } = await preloadPlant(d, 'sec-a');
    assert.deepEqual(fired, [], `the planted object ran on the host in: ${fired.join(', ')}`);
    assert.equal(inside, 'pwned\n', 'LD_PRELOAD with the inside path works inside the sandbox');
  });

  it('passes env verbatim inside and refuses keys a shell cannot export (400)', async () => {
    const r = await sh(d, 'sec-a', 'printf "%s|" "$A" "$B"; env | grep -c "^SBX_ENV" || true', {
      env: { A: 'it\'s $HOME `id` \\ "q"', B: 'line1\nline2' },
    });
    assert.equal(r.stdout, `it's $HOME \`id\` \\ "q"|line1\nline2|0\n`);
    for (const bad of ['A-B', 'a.b', '1X', 'SBX_ENV_KEYS', 'X Y']) {
      const res = await new Promise<number>((resolve) => {
        const ws = openExec(d, 'sec-a', ['true'], { env: { [bad]: 'v' } });
        ws.on('unexpected-response', (_req, r2) => resolve(r2.statusCode ?? 0));
        ws.on('open', () => {
          ws.terminate();
          resolve(101);
        });
        ws.on('error', () => {});
      });
      assert.equal(res, 400, `env key ${bad}`);
    }
  });

  it('leaves sandbox processes no inherited file descriptor beyond stdio', async () => {
    for (const { label, o } of EXEC_MODES) {
      // The fds of a program the exec'd shell starts in the background, once it sleeps (its comm is
      // "sleep" and its state S): listing the shell's own fds through a pipeline would race with the
      // pipe fds the shell holds while it sets it up; before its exec the forked child briefly holds
      // the /dev/null it makes its stdin from, and after it the dynamic loader the libraries it maps.
      const r = await exec(
        d,
        'sec-a',
        [
          '/bin/sh',
          '-c',
          'sleep 30 & p=$!; until [ "$(cat /proc/$p/comm)" = sleep ] && [ "$(cut -d" " -f3 /proc/$p/stat)" = S ]; do :; done; ls /proc/$p/fd | sort -n | tr "\\n" " "; kill $p',
        ],
        o,
      );
      assert.equal(r.stdout.trim(), '0 1 2', `${label}: ${r.stdout}`);
    }
  });

  it('lets only the init hold the exec FIFO directory: its user namespace holders and execs do not', async () => {
    // The init opens the directory (fd 9) before it starts the holders, which close it first thing
    // (init.sh): a holder stays for the sandbox's life, and from its fds the directory would be in reach.
    const init = initPid(d, 'sec-a');
    assert.ok(init > 0, 'sec-a runs');
    // The directory by identity (device and inode): detached from every tree, it has no telling path.
    const dir = statSync(`/proc/${init}/fd/9`);
    assert.ok(dir.isDirectory());
    const fifoDirOf = (pid: number | string) =>
      readdirSync(`/proc/${pid}/fd`).filter((fd) => {
        try {
          const st = statSync(`/proc/${pid}/fd/${fd}`);
          return st.dev === dir.dev && st.ino === dir.ino;
        } catch {
          return false;
        }
      });
    assert.deepEqual(fifoDirOf(init), ['9']);
    const pidns = readlinkSync(`/proc/${init}/ns/pid`);
    const holders = readFileSync(`/proc/${init}/task/${init}/children`, 'utf8').trim().split(/\s+/);
    const sandboxProcs = () =>
      readdirSync('/proc').filter((e) => {
        if (!/^\d+$/.test(e) || Number(e) === init) return false;
        try {
          return readlinkSync(`/proc/${e}/ns/pid`) === pidns || holders.includes(e);
        } catch {
          return false;
        }
      });
    const comm = (pid: string) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        return '';
      }
    };
    const sleeper = openExec(d, 'sec-a', ['sleep', '30']);
    try {
      await waitFor(
        async () => sandboxProcs().some((p) => comm(p) === 'sleep' && !holders.includes(p)),
        'the exec runs',
      );
      const others = sandboxProcs();
      assert.ok(
        holders.every((h) => others.includes(h)),
        `holders ${holders.join(' ')} among ${others.join(' ')}`,
      );
      for (const pid of others)
        assert.deepEqual(fifoDirOf(pid), [], `process ${pid} holds the FIFO directory`);
    } finally {
      sleeper.terminate();
    }
  });

  it("gives no process another session's terminal: sandboxd holds no pty, execs elsewhere see stdio only", async () => {
    // A blocking TTY session in sec-a stays open while other execs start, in sec-b and in sec-a.
    const ws = openExec(d, 'sec-a', ['/bin/sh', '-c', 'echo up; sleep 30'], { tty: true });
    const up = new Promise<void>((resolve) => ws.on('message', (m: Buffer) => m.includes('up') && resolve()));
    ws.on('error', () => {});
    try {
      await up;
      // Every descriptor of sandboxd beyond stdio is close-on-exec: none can reach a process it starts.
      const inheritable = readdirSync(`/proc/${d.pid}/fd`).filter((fd) => {
        if (Number(fd) <= 2) return false;
        try {
          const flags = /^flags:\s+([0-7]+)/m.exec(readFileSync(`/proc/${d.pid}/fdinfo/${fd}`, 'utf8'))?.[1];
          return (Number.parseInt(flags ?? '0', 8) & 0o2000000) === 0;
        } catch {
          return false; // closed meanwhile
        }
      });
      assert.deepEqual(inheritable, [], 'sandboxd descriptors without close-on-exec');
      for (const name of ['sec-b', 'sec-a']) {
        for (const { label, o } of EXEC_MODES) {
          const r = await exec(
            d,
            name,
            [
              '/bin/sh',
              '-c',
              'sleep 30 & p=$!; until [ "$(cat /proc/$p/comm)" = sleep ] && [ "$(cut -d" " -f3 /proc/$p/stat)" = S ]; do :; done; ls -l /proc/$p/fd; kill $p',
            ],
            o,
          );
          assert.doesNotMatch(r.stdout, /ptmx/, `${name} ${label}: ${r.stdout}`);
          const fds = [...r.stdout.matchAll(/ (\d+) -> /g)].map((m) => m[1]).join(' ');
          assert.equal(fds, '0 1 2', `${name} ${label}: ${r.stdout}`);
        }
      }
    } finally {
      ws.terminate();
    }
  });

  it('resolves host helpers to absolute paths and gives host processes only system directories on PATH', () => {
    const tools = resolveHostTools(HOST_PATH);
    for (const [name, p] of Object.entries(tools))
      assert.ok(p === null || path.isAbsolute(p), `${name}: ${p}`);
    assert.ok(tools.perl, 'perl (optional) is found here');
    for (const dir of HOST_PATH.split(':')) assert.ok(!dir.includes('home') && !dir.includes('.local'), dir);
  });
});

describe('no host detail inside (finding 2, finding 12, issue 8 item 6)', () => {
  it('names tenant directories by a keyed hash whose key is a mode-600 secret of the daemon', () => {
    const tenants = readdirSync(path.join(d.dataDir, 'tenants'));
    assert.equal(tenants.length, 1);
    const bare = createHash('sha256').update(d.token).digest('hex');
    assert.match(tenants[0]!, /^[0-9a-f]{32}$/);
    assert.ok(!bare.startsWith(tenants[0]!.slice(0, 16)), 'not the bare token hash');
    const key = statSync(path.join(d.dataDir, 'tenant.key'));
    assert.equal(key.mode & 0o777, 0o600);
    assert.equal(key.size, 32);
  });

  it('shows neither the data dir nor the tenant directory in mountinfo, cgroup or fd links', async () => {
    const tenant = readdirSync(path.join(d.dataDir, 'tenants'))[0]!;
    const r = await sh(
      d,
      'sec-b',
      'cat /proc/self/mountinfo /proc/self/cgroup; for f in /proc/self/fd/*; do readlink $f || true; done',
    );
    assert.equal(r.exitCode, 0, r.stderr);
    assert.ok(r.stdout.includes(' / / '), r.stdout);
    for (const leak of [d.dataDir, tenant, 'paddock-sandboxd', 'tenants/', 'sec-b']) {
      assert.ok(!r.stdout.includes(leak), `${leak} visible inside:\n${r.stdout}`);
    }
  });

  it('keeps a data dir of an earlier version (unkeyed tenant directory, shared ids) working', async () => {
    // Earlier versions had directory layers (no disk images).
    const old = await startTestSandboxd({ env: { SANDBOXD_DISK_MAX: '0' } });
    const dataDir = old.dataDir;
    let again: TestSandboxd | null = null;
    try {
      assert.equal((await api(old, 'POST', '/v1/sandboxes', { name: 'legacy' })).status, 201);
      assert.equal((await sh(old, 'legacy', 'echo kept > ~/file; mkdir ~/dir')).exitCode, 0);
      await old.stop({ keepData: true });
      // Make it what an earlier version left: tenant named by sha256(token)[:16], no id slot, ids 100000+.
      const dir = sandboxDir(old, 'legacy');
      const rec = JSON.parse(readFileSync(path.join(dir, 'sandbox.json'), 'utf8')) as Record<string, unknown>;
      const init = rec['init'] as { pid: number } | null;
      if (init) process.kill(init.pid, 'SIGKILL');
      delete rec['slot'];
      rec['init'] = null;
      writeFileSync(path.join(dir, 'sandbox.json'), JSON.stringify(rec));
      spawnSync('chown', ['-hR', '100000:100000', path.join(dir, 'layer')]);
      spawnSync('chown', ['-hR', '101000:101000', path.join(dir, 'layer', 'root', 'home', 'sandbox')]);
      const tenants = path.join(dataDir, 'tenants');
      const legacy = createHash('sha256').update(old.token).digest('hex').slice(0, 16);
      renameSync(path.join(tenants, readdirSync(tenants)[0]!), path.join(tenants, legacy));

      again = await startTestSandboxd({ dataDir, token: old.token });
      const r = await sh(again, 'legacy', 'cat ~/file; touch ~/dir/new && echo writable; id -u');
      assert.equal(r.stdout, 'kept\nwritable\n1000\n', r.stderr);
      assert.deepEqual(
        readdirSync(tenants).filter((t) => t === legacy),
        [],
        'the tenant directory got its keyed name',
      );
      const home = statSync(
        path.join(sandboxDir(again, 'legacy'), 'layer', 'root', 'home', 'sandbox', 'file'),
      );
      assert.notEqual(home.uid, 101000, 'the layer now belongs to the sandbox own ids');
      await api(again, 'DELETE', '/v1/sandboxes/legacy');
    } finally {
      await (again ?? old).stop();
    }
  });
});

if (!ROOTLESS)
  describe('per-sandbox host identities (deliverable 2, findings 8, 9)', () => {
    it('maps every sandbox to its own host ids, none of them host root, and its user namespace is owned by them', async () => {
      const maps = new Map<string, string>();
      for (const name of ['sec-a', 'sec-b']) {
        const r = await sh(d, name, 'cat /proc/self/uid_map /proc/self/gid_map; id -u; touch ~/mine');
        maps.set(name, r.stdout);
        // One line per map, the sandbox's whole range: `0 <first host id> 65536`; its user is the first + 1000.
        const lines = r.stdout.trim().split('\n');
        assert.deepEqual(lines[0]!.trim().split(/\s+/).slice(2), [String(ID_RANGE)], r.stdout);
        assert.equal(lines[0]!.trim().split(/\s+/)[0], '0', r.stdout);
        const hostUser = Number(lines[0]!.trim().split(/\s+/)[1]) + 1000;
        assert.ok(hostUser >= DEFAULTS.idBase, r.stdout);
        assert.equal(
          statSync(path.join(sandboxLayer(d, name), 'root', 'home', 'sandbox', 'mine')).uid,
          hostUser,
        );
        const rec = JSON.parse(readFileSync(path.join(sandboxDir(d, name), 'sandbox.json'), 'utf8')) as {
          init: { holderPid: number };
        };
        const status = readFileSync(`/proc/${rec.init.holderPid}/status`, 'utf8');
        // The holder runs as the sandbox's own root id: the namespace was created by (and is charged to) it.
        assert.equal(Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]), hostUser - 1000);
      }
      assert.notEqual(maps.get('sec-a'), maps.get('sec-b'));
    });

    it('one sandbox exhausting inotify instances leaves another sandbox and host root able to create them', async () => {
      assert.ok(NR, `syscall numbers for ${process.arch}`);
      const hog = `perl -e '$|=1; $n=0; while (1) { last if syscall(${NR.inotifyInit1}, 0) < 0; $n++ } print "held $n: $!\\n"; sleep 60'`;
      const ws = openExec(d, 'sec-a', ['/bin/sh', '-c', hog], { detachable: true });
      let out = '';
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (isBinary && data[0] === 1) out += data.subarray(1).toString();
      });
      const done = collect(ws, false, 90_000);
      await waitFor(() => out.includes('held'), 'the inotify hog', 30_000);
      assert.match(out, /held \d+: Too many open files/);
      const probe = `perl -e 'print syscall(${NR.inotifyInit1}, 0) < 0 ? "failed: $!" : "ok"'`;
      assert.equal((await sh(d, 'sec-b', probe)).stdout, 'ok');
      const host = spawnSync('/bin/sh', ['-c', probe], { encoding: 'utf8' });
      assert.equal(host.stdout, 'ok', 'host root can still create inotify instances');
      ws.terminate();
      await done;
      await sh(d, 'sec-a', 'pkill -x perl; true');
    });

    it('one sandbox filling its kernel key quota leaves another sandbox able to add keys', async () => {
      assert.ok(NR, `syscall numbers for ${process.arch}`);
      // syscall() needs writable strings (perlfunc): no literals.
      const addKey = (desc: string) =>
        `do { ($t, $k, $v) = ("user", ${desc}, "x" x 64); syscall(${NR.addKey}, $t, $k, $v, 64, -4) }`;
      const fill = `perl -e '$n=0; while ($n < 100000) { last if ${addKey('"k$n"')} < 0; $n++ } print "added $n: $!"'`;
      const a = await sh(d, 'sec-a', fill);
      assert.match(a.stdout, /^added \d+: Disk quota exceeded$/, a.stderr);
      const b = await sh(d, 'sec-b', `perl -e 'print ${addKey('"probe"')} < 0 ? "failed: $!" : "ok"'`);
      assert.equal(b.stdout, 'ok', b.stderr);
    });

    it('refuses to start when the id range overlaps /etc/subuid or /etc/subgid, naming SANDBOXD_ID_BASE', async () => {
      const tmp = mkdtempSync(path.join(os.tmpdir(), 'paddock-subid-'));
      try {
        writeFileSync(path.join(tmp, 'subuid'), '# users\nalice:100000:65536\n');
        writeFileSync(path.join(tmp, 'subgid'), 'alice:100000:65536\n');
        const files = { uid: path.join(tmp, 'subuid'), gid: path.join(tmp, 'subgid') };
        await assert.rejects(
          startSandboxd({
            tokens: ['t'],
            dataDir: path.join(tmp, 'data'),
            idBase: 100000,
            subidFiles: files,
          }),
          (err: Error) => {
            assert.match(err.message, /^SANDBOXD_ID_BASE=100000 .*overlap "alice:100000:65536" in .*subuid/);
            assert.ok(!err.message.includes('\n'));
            return true;
          },
        );
        assert.ok(!existsSync(path.join(tmp, 'data')), 'nothing was set up');
        // The default does not overlap Debian's first allocation, and the span must fit below 2^32.
        assert.doesNotThrow(() => assertNoSubidOverlap(DEFAULTS.idBase, files));
        assert.throws(
          () => loadConfig({ SANDBOXD_TOKEN: 't', SANDBOXD_ID_BASE: '4294000000' }),
          /SANDBOXD_ID_BASE/,
        );
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    });
  });

if (ROOTLESS)
  describe('one shared host identity, separate namespaces (rootless; docs/sandboxd.md "Differences and limits")', () => {
    it("maps every sandbox to the daemon's own uid, never host root, and its user namespace is owned by it", async () => {
      const self = process.getuid?.() ?? -1;
      const maps = new Map<string, string>();
      for (const name of ['sec-a', 'sec-b']) {
        const r = await sh(d, name, 'cat /proc/self/uid_map; id -u; touch ~/mine');
        assert.equal(r.exitCode, 0, r.stderr);
        maps.set(name, r.stdout);
        // The sandbox's own ids map onto the outer user namespace, whose only id is the daemon's uid.
        assert.match(r.stdout, /^\s*1000\s+\d+\s+1\n/m, r.stdout);
        assert.ok(r.stdout.endsWith('1000\n'), r.stdout);
        assert.equal(statSync(path.join(sandboxLayer(d, name), 'root', 'home', 'sandbox', 'mine')).uid, self);
        const rec = JSON.parse(readFileSync(path.join(sandboxDir(d, name), 'sandbox.json'), 'utf8')) as {
          init: { holderPid: number };
        };
        const status = readFileSync(`/proc/${rec.init.holderPid}/status`, 'utf8');
        assert.equal(Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]), self);
      }
      // Shared by design: one host uid for every sandbox of a rootless daemon.
      assert.equal(maps.get('sec-a'), maps.get('sec-b'));
    });

    it("keeps two sandboxes of that one uid apart: neither sees, signals nor reaches the other's processes, files or loopback", async () => {
      const server = `node -e 'require("net").createServer((s) => s.end("from a")).listen(4545, "127.0.0.1")'`;
      const a = await sh(
        d,
        'sec-a',
        `echo a-only > ~/secret-a; (sleep 3131 >/dev/null 2>&1 &); (${server} >/dev/null 2>&1 &); for i in $(seq 50); do curl -s --http0.9 -m 1 127.0.0.1:4545 && break; sleep 0.1; done`,
      );
      assert.equal(a.stdout, 'from a', a.stderr);
      // The host pid of sec-a's sleep: a real process, owned by the same uid as sec-b's.
      const hostPid = await waitFor(() => hostPidOf('sleep\x003131'), 'the sleep of sec-a');
      const layerA = path.join(sandboxLayer(d, 'sec-a'), 'root', 'home', 'sandbox', 'secret-a');
      assert.equal(readFileSync(layerA, 'utf8'), 'a-only\n');
      const b = await sh(
        d,
        'sec-b',
        [
          'ps -eo args | grep -c "^sleep 3131" || true',
          `kill -9 ${hostPid} 2>/dev/null && echo killed || echo no-kill`,
          'cat ~/secret-a 2>/dev/null || echo no-file',
          `cat '${layerA}' 2>/dev/null || echo no-host-path`,
          `ls /proc/${hostPid} >/dev/null 2>&1 && echo proc-visible || echo no-proc`,
          'curl -s --http0.9 -m 2 127.0.0.1:4545; echo " rc=$?"',
        ].join('; '),
      );
      assert.equal(b.stdout, '0\nno-kill\nno-file\nno-host-path\nno-proc\n rc=7\n', b.stderr);
      assert.ok(existsSync(`/proc/${hostPid}`), "sec-a's process still runs");
      await sh(d, 'sec-a', 'pkill -f "sleep 3131"; pkill -x node; true');
    });

    it('ignores SANDBOXD_ID_BASE, even one overlapping /etc/subuid (no host id range is used)', async () => {
      const tmp = mkdtempSync(path.join(os.tmpdir(), 'paddock-subid-'));
      try {
        writeFileSync(path.join(tmp, 'subuid'), 'alice:100000:65536\n');
        writeFileSync(path.join(tmp, 'subgid'), 'alice:100000:65536\n');
        const files = { uid: path.join(tmp, 'subuid'), gid: path.join(tmp, 'subgid') };
        const started = await startSandboxd({
          tokens: ['t'],
          dataDir: path.join(tmp, 'data'),
          idBase: 100000,
          subidFiles: files,
        });
        await started.close();
        // The check itself still refuses the overlap (a root daemon runs it at start).
        assert.throws(() => assertNoSubidOverlap(100000, files), /SANDBOXD_ID_BASE=100000/);
      } finally {
        execFileSync('chmod', ['-R', 'u+rwx', '--', tmp]);
        rmSync(tmp, { recursive: true, force: true });
      }
    });
  });

describe('low findings (finding 12)', () => {
  it('answers a malformed %-escape in a path with 400 in the error shape, HTTP and WebSocket', async () => {
    const r = await api(d, 'GET', '/v1/sandboxes/%ZZ');
    assert.equal(r.status, 400);
    assert.equal(r.json['error'], 'bad_request');
    assert.equal(typeof r.json['message'], 'string');
    const ws = new WebSocket(`${d.url.replace(/^http/, 'ws')}/v1/sandboxes/%ZZ/exec?cmd=true`, {
      headers: { authorization: `Bearer ${d.token}` },
    });
    const status = await new Promise<number>((resolve) => {
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', () => resolve(0));
    });
    assert.equal(status, 400);
    assert.equal((await fetch(`${d.url}/health`)).status, 200);
  });

  it('removes the sandbox cgroups of every controller on destroy', async () => {
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'sec-cg' })).status, 201);
    assert.equal(
      (await sh(d, 'sec-cg', 'head -c 8000000 /dev/zero > /tmp/f; sleep 100 & echo ok')).stdout,
      'ok\n',
    );
    const before = sandboxCgroups(d.dataDir);
    assert.ok(
      before.length > 0 || d.logs().some((l) => l.includes('limits are NOT enforced')),
      'cgroups used',
    );
    assert.equal((await api(d, 'DELETE', '/v1/sandboxes/sec-cg')).status, 204);
    const left = sandboxCgroups(d.dataDir).filter((c) => c.endsWith('-sec-cg'));
    assert.deepEqual(left, []);
  });

  it('copies no private key of /etc/ssl or /etc/pki into the base, on any layout', () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'paddock-etc-'));
    try {
      const etc = path.join(tmp, 'etc');
      const files: [string, number][] = [
        ['ssl/certs/ca.pem', 0o644],
        ['ssl/private/host.key', 0o600],
        ['pki/tls/certs/ca-bundle.crt', 0o644],
        ['pki/tls/private/server.key', 0o644],
        ['pki/tls/misc/signing.key', 0o640],
        ['pki/nssdb/key4.db', 0o600],
        ['pki/rpm-gpg/RPM-GPG-KEY', 0o644],
      ];
      for (const [f, mode] of files) {
        mkdirSync(path.dirname(path.join(etc, f)), { recursive: true });
        writeFileSync(path.join(etc, f), f);
        chmodSync(path.join(etc, f), mode);
      }
      mkdirSync(path.join(etc, 'pki', 'keys'), { mode: 0o700 });
      writeFileSync(path.join(etc, 'pki', 'keys', 'k'), 'secret');
      const self = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
      const base = ensureBase(
        path.join(tmp, 'data'),
        sandboxIds(1, null, self),
        undefined,
        resolveHostTools(HOST_PATH),
        etc,
      );
      const copied = (rel: string) => existsSync(path.join(base.lower, 'etc', rel));
      assert.ok(copied('ssl/certs/ca.pem'));
      assert.ok(copied('pki/tls/certs/ca-bundle.crt'));
      assert.ok(copied('pki/rpm-gpg/RPM-GPG-KEY'));
      for (const gone of [
        'ssl/private',
        'pki/tls/private',
        'pki/tls/misc/signing.key',
        'pki/nssdb/key4.db',
        'pki/keys',
      ])
        assert.ok(!copied(gone), `${gone} copied`);
      assert.ok(lstatSync(path.join(base.lower, 'etc', 'passwd')).isFile());
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

/** Sandbox cgroup directories of the daemon on `dataDir` (runtime/cgroups.ts naming), in any controller. */
function sandboxCgroups(dataDir: string): string[] {
  return daemonCgroupParents(dataDir).flatMap((parent) =>
    readdirSync(parent, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => path.join(parent, e.name)),
  );
}

/** The host pid of a process whose command line contains `needle` (arguments joined by NUL), or 0. */
function hostPidOf(needle: string): number {
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(needle)) return Number(e);
    } catch {}
  }
  return 0;
}
