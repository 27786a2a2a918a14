/**
 * Rootless mode (docs/sandboxd.md, "Rootless"): sandboxd really runs as an unprivileged user.
 *
 * As root (CI), the daemon runs as the dedicated system user `paddock-rootless-solo` (created here once with
 * useradd; it is left in place), which no other test uses: this file asserts that nothing of that user outlives
 * its daemon, and the attack tests' rootless daemons (modes.ts, user `paddock-rootless-test`) run meanwhile in
 * other test files. As any other user, as that user. Needs unprivileged user namespaces: when
 * the kernel refuses them, sandboxd must refuse to start rootless and say why, and that is what is tested
 * instead (or the run fails when PADDOCK_REQUIRE_ROOTLESS=1 is set, as in CI). The refusal itself is also
 * tested everywhere, with an `unshare` that fails placed first on PATH.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EXEC_MODES, pathPlant, preloadPlant } from './attacks.ts';
import { sandboxdLaunch, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, checkpointIdOf, exec, ndjsonLines, sh, waitFor } from './helpers.ts';
import { createTestNet, type TestNet } from './netns.ts';

const TEST_USER = 'paddock-rootless-solo';
const REQUIRE = process.env['PADDOCK_REQUIRE_ROOTLESS'] === '1';
const SB = 'rootless';

interface User {
  uid: number;
  gid: number;
  name: string;
  /** the test spawns the daemon as this user (false: the test itself already runs as it) */
  switched: boolean;
}

function run(cmd: string, args: string[]): { ok: boolean; out: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 20_000 });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`.trim();
  return { ok: r.status === 0, out };
}

function sysctl(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

/**
 * The unprivileged user to run sandboxd as (`problem` when the test cannot prepare one), and
 * `unavailable`: why unprivileged user namespaces are refused to it, if they are.
 */
function detect(): { user: User; unavailable: string | null } | { problem: string } {
  let user: User;
  if (process.getuid?.() === 0) {
    if (!run('id', ['-u', TEST_USER]).ok) {
      const add = run('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', TEST_USER]);
      // A concurrent run may have created it meanwhile.
      if (!add.ok && !run('id', ['-u', TEST_USER]).ok)
        return { problem: `cannot create the system user ${TEST_USER}: ${add.out}` };
    }
    user = {
      uid: Number(execFileSync('id', ['-u', TEST_USER], { encoding: 'utf8' })),
      gid: Number(execFileSync('id', ['-g', TEST_USER], { encoding: 'utf8' })),
      name: TEST_USER,
      switched: true,
    };
  } else {
    user = {
      uid: process.getuid?.() ?? -1,
      gid: process.getgid?.() ?? -1,
      name: os.userInfo().username,
      switched: false,
    };
  }
  const as = (argv: string[]) =>
    user.switched
      ? run('setpriv', [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--init-groups', ...argv])
      : run(argv[0]!, argv.slice(1));
  // node and main.ts need not be reachable: the harness bind-mounts a checkout the user cannot reach
  // (sandboxdLaunch). The temp dir must be writable: the data dirs are made there.
  const access = as(['/bin/sh', '-c', 'test -w "$1"', 'probe', os.tmpdir()]);
  if (!access.ok) return { problem: `${user.name} cannot write to ${os.tmpdir()} ${access.out}`.trim() };
  const probe = as(['unshare', '--user', '--map-root-user', '--mount', '--pid', '--fork', '--net', 'true']);
  if (probe.ok) return { user, unavailable: null };
  const why: string[] = [];
  if (sysctl('/proc/sys/kernel/unprivileged_userns_clone') === '0')
    why.push('kernel.unprivileged_userns_clone=0');
  if (sysctl('/proc/sys/user/max_user_namespaces') === '0') why.push('user.max_user_namespaces=0');
  if (sysctl('/proc/sys/kernel/apparmor_restrict_unprivileged_userns') === '1')
    why.push(
      'AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)',
    );
  return {
    user,
    unavailable: `unprivileged user namespaces are not available to ${user.name}: ${why.join(', ') || 'unshare failed'} (${probe.out})`,
  };
}

/** Starts sandboxd as `user` and waits for it to exit by itself (it must refuse to start). */
async function startRefused(
  user: User,
  pathPrefix?: string,
): Promise<{ code: number | null; stderr: string }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sandboxd-rootless-refused-'));
  if (user.switched) chownSync(dataDir, user.uid, user.gid);
  const launch = sandboxdLaunch(user.switched ? { uid: user.uid, gid: user.gid } : undefined);
  try {
    const child = spawn(launch.command, launch.args, {
      env: {
        PATH: `${pathPrefix ? `${pathPrefix}:` : ''}${process.env['PATH'] ?? '/usr/bin:/bin'}`,
        SANDBOXD_ADDR: '127.0.0.1:0',
        SANDBOXD_TOKEN: 'refused-token',
        SANDBOXD_DATA_DIR: dataDir,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(launch.ids ?? {}),
    });
    child.once('exit', () => launch.dispose());
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    assert.doesNotMatch(stdout, /"ready":true/, 'sandboxd must not report ready');
    return { code, stderr };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Host pids whose pid namespace is `ns` (a /proc/<pid>/ns/pid link). */
function pidsIn(ns: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readlinkSync(`/proc/${e}/ns/pid`) === ns) out.push(Number(e));
    } catch {}
  }
  return out;
}

/** Live (non-zombie) host processes of `uid`. */
function processesOf(uid: number): string[] {
  const out: string[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const status = readFileSync(`/proc/${e}/status`, 'utf8');
      const real = /^Uid:\s+(\d+)/m.exec(status)?.[1];
      const state = /^State:\s+(\S)/m.exec(status)?.[1];
      if (Number(real) === uid && state !== 'Z')
        out.push(`${e} ${readFileSync(`/proc/${e}/cmdline`, 'utf8').replaceAll('\0', ' ')}`);
    } catch {}
  }
  return out;
}

const found = detect();

const REFUSAL =
  /cannot start: unprivileged user namespaces are not available to this user .*run sandboxd as root/s;

if ('problem' in found) {
  it('prepares an unprivileged user to run sandboxd as', () => {
    assert.fail(found.problem);
  });
} else {
  it('refuses to start rootless without user namespaces, and says why', async () => {
    const fakes = mkdtempSync(path.join(os.tmpdir(), 'sandboxd-no-userns-'));
    try {
      chmodSync(fakes, 0o755);
      writeFileSync(
        path.join(fakes, 'unshare'),
        '#!/bin/sh\necho "unshare: unshare failed: Operation not permitted" >&2\nexit 1\n',
        { mode: 0o755 },
      );
      const res = await startRefused(found.user, fakes);
      assert.equal(res.code, 1);
      assert.match(res.stderr, REFUSAL);
      assert.match(res.stderr, /Operation not permitted/);
    } finally {
      rmSync(fakes, { recursive: true, force: true });
    }
  });
}

if ('problem' in found) {
  // Reported by the failing test above.
} else if (found.unavailable !== null) {
  const reason = found.unavailable;
  if (REQUIRE) {
    it('rootless mode (required by PADDOCK_REQUIRE_ROOTLESS=1)', () => {
      assert.fail(`rootless mode is required but cannot run on this machine: ${reason}`);
    });
  } else {
    it('refuses to start rootless on this machine, which refuses user namespaces', async (t) => {
      t.diagnostic(reason);
      const res = await startRefused(found.user);
      assert.equal(res.code, 1);
      assert.match(res.stderr, REFUSAL);
    });
  }
} else {
  const { user } = found;
  let d: TestSandboxd;
  let web: http.Server;
  let webPort = 0;

  // The proxy refuses loopback: the upstream lives in a test network namespace (netns.ts). Run as an ordinary
  // user, that network's host namespace is one of a user namespace the test owns, and the daemon runs there.
  let tnet: TestNet;
  const upstream = () => tnet.ip;

  before(async () => {
    web = http.createServer((req, res) => res.end(`hello ${req.headers.host}`));
    tnet = await createTestNet();
    const l = await tnet.listen();
    l.server.on('connection', (s) => web.emit('connection', s));
    webPort = l.port;
    d = await startTestSandboxd({
      net: tnet,
      hosts: { 'allowed.test': upstream(), 'denied.test': upstream() },
      env: { SANDBOXD_EGRESS_ALLOW_CIDRS: tnet.allowEnv },
      ...(user.switched ? { user: { uid: user.uid, gid: user.gid } } : {}),
    });
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: SB })).status, 201);
  });
  after(async () => {
    if (d) {
      await api(d, 'DELETE', `/v1/sandboxes/${SB}`);
      await d.stop();
    }
    web?.closeAllConnections();
    tnet?.close();
    // The dedicated user runs nothing but this file's daemon (no other test file uses it): nothing of it may
    // outlive the daemon.
    if (user.switched) {
      await waitFor(() => processesOf(user.uid).length === 0, 'the test user to run nothing', 3000).catch(
        () => {},
      );
      const left = processesOf(user.uid);
      for (const p of left) {
        try {
          process.kill(Number(p.split(' ')[0]), 'SIGKILL');
        } catch {}
      }
      assert.deepEqual(left, [], 'processes of the test user left behind');
    }
  });

  describe(`rootless sandboxd (as ${user.name}, uid ${user.uid})`, () => {
    it('runs unprivileged, in rootless mode', async () => {
      const listening = d.logs().find((l) => l.includes('"sandboxd listening"'));
      assert.ok(listening, d.logs().join('\n'));
      assert.equal(JSON.parse(listening)['rootless'], true);
      // Everything sandboxd created on disk belongs to the unprivileged user.
      assert.equal(statSync(path.join(d.dataDir, 'base')).uid, user.uid);
      const info = await api(d, 'GET', `/v1/sandboxes/${SB}`);
      assert.equal(info.status, 200);
      // Without a delegated cgroup subtree the API reports the limits as not enforced instead of pretending.
      const limits = info.json['limits'] as { cgroup: string | null; memory_bytes: number | null };
      if (limits.cgroup === null) assert.equal(limits.memory_bytes, null);
    });

    it('execs as the sandbox user with exit code, stdout/stderr, env and dir', async () => {
      assert.equal((await sh(d, SB, 'mkdir -p ~/work/sub')).exitCode, 0);
      const r = await sh(d, SB, 'id -un; id -u; pwd; echo "$GREETING"; echo oops >&2; exit 3', {
        env: { GREETING: 'hi there' },
        dir: 'work/sub',
      });
      assert.equal(r.exitCode, 3, r.stderr);
      assert.equal(r.stdout, 'sandbox\n1000\n/home/sandbox/work/sub\nhi there\n');
      assert.equal(r.stderr, 'oops\n');
      assert.equal((await exec(d, SB, ['no-such-command'])).exitCode, 127);
      const tty = await exec(d, SB, ['/bin/sh', '-c', 'test -t 0 && echo is-a-tty'], { tty: true });
      assert.equal(tty.exitCode, 0);
      assert.match(tty.stdout, /is-a-tty/);
      const detached = await exec(d, SB, ['/bin/sh', '-c', 'echo kept; exit 4'], { detachable: true });
      assert.equal(detached.exitCode, 4, detached.stderr);
      assert.equal(detached.stdout, 'kept\n');
    });

    it('writes files as the sandbox user', async () => {
      const w = await api(
        d,
        'PUT',
        `/v1/sandboxes/${SB}/fs/write?path=work/new/hello.txt&mode=0640&mkdirParents=true`,
        new TextEncoder().encode('hello file\n'),
      );
      assert.equal(w.status, 204, w.text);
      const r = await sh(d, SB, 'stat -c "%a %U" work/new/hello.txt; cat work/new/hello.txt');
      assert.equal(r.stdout, '640 sandbox\nhello file\n');
      const denied = await api(
        d,
        'PUT',
        `/v1/sandboxes/${SB}/fs/write?path=/usr/bin/evil`,
        new Uint8Array(1),
      );
      assert.equal(denied.status, 400);
      assert.match(denied.text, /Permission denied|Read-only/);
    });

    it('cannot see host secrets, the project, the data dir, host processes or host networks', async () => {
      const r = await sh(
        d,
        SB,
        `cat /etc/shadow; ls /work/main; ls ${d.dataDir}; ls ${process.cwd()}; ls -A /home; cat /proc/1/environ; touch /usr/bin/evil; echo end`,
      );
      assert.match(r.stderr, /\/etc\/shadow: No such file/);
      assert.match(r.stderr, /\/work\/main.*No such file/);
      assert.ok(r.stderr.includes(`${d.dataDir}': No such file`), r.stderr);
      assert.match(r.stderr, /\/proc\/1\/environ: Permission denied/);
      assert.match(r.stderr, /\/usr\/bin\/evil.*Permission denied/);
      assert.match(r.stdout, /^sandbox\nend\n$/);

      const ps = await sh(d, SB, 'ps -eo pid=,args=');
      const lines = ps.stdout.trim().split('\n');
      // pid 1 is the init's shell, its script in its environment (runtime/namespaces.ts): no host path.
      assert.match(lines[0]!, /^\s*1 \S*\/sh -c eval "\$SBX_INIT" sandbox-init$/);
      assert.ok(lines.length < 10, ps.stdout);
      assert.doesNotMatch(ps.stdout, /node|sandboxd|--test|process_api|systemd/);

      // Interface names from sysfs (empty in a sandbox), /proc/net/dev and iproute2.
      const net = await sh(
        d,
        SB,
        "ls /sys/class/net 2>/dev/null; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; ip -o link | cut -d: -f2 | tr -d ' '",
      );
      assert.equal(net.stdout, 'lo\nlo\n');
      const direct = await sh(
        d,
        SB,
        `curl -sS -m 3 --noproxy '*' http://${upstream()}:${webPort}/; echo rc=$?`,
      );
      assert.match(direct.stdout, /rc=7/);
      assert.doesNotMatch(direct.stdout, /hello/);
    });

    it('reaches only allowed hosts through the egress proxy', async () => {
      const policy = await api(d, 'POST', `/v1/sandboxes/${SB}/policy/network`, {
        rules: [{ domain: 'allowed.test', action: 'allow' }],
      });
      assert.equal(policy.status, 204);
      const curl = (host: string, extra = '') =>
        sh(d, SB, `curl -sS -m 5 ${extra} -w ' %{http_code}' http://${host}:${webPort}/; echo " rc=$?"`);
      assert.match((await curl('allowed.test')).stdout, new RegExp(`hello allowed.test:${webPort} 200 rc=0`));
      assert.match((await curl('denied.test')).stdout, / 403 rc=0/);
      assert.match((await curl('allowed.test', '-p')).stdout, /hello allowed.test.* 200 rc=0/);
      assert.match((await curl('denied.test', '--socks5-hostname 127.0.0.1:3128')).stdout, /rc=97/);
    });

    it('runs no planted program and loads no planted object on the host (issue 12 finding 1)', async () => {
      const plant = await pathPlant(d, SB);
      assert.deepEqual(plant.fired, [], `planted programs ran on the host in: ${plant.fired.join(', ')}`);
      for (const o of plant.outputs) assert.match(o, /: 0 1000$/, plant.outputs.join('\n'));
      const preload = await preloadPlant(d, SB);
      assert.deepEqual(
        preload.fired,
        [],
        `the planted object ran on the host in: ${preload.fired.join(', ')}`,
      );
    });

    it('never runs a planted nsenter (or any program of the sandbox) with privileges (issue 12 finding 5)', async () => {
      // The default PATH inside starts with ~/.local/bin: plant every helper name there.
      const names = ['nsenter', 'env', 'sh', 'unshare', 'setpriv', 'sleep'];
      const planted = await sh(
        d,
        SB,
        `set -e; mkdir -p ~/.local/bin; for n in ${names.join(' ')}; do printf '#!/bin/sh\\nid -u > /tmp/planted-ran\\nexec /usr/bin/$(basename $0) "$@"\\n' > ~/.local/bin/$n; chmod 755 ~/.local/bin/$n; done`,
      );
      assert.equal(planted.exitCode, 0, planted.stderr);
      for (const { label, o } of EXEC_MODES) {
        const r = await exec(d, SB, ['id', '-u'], o);
        assert.equal(r.exitCode, 0, `${label}: ${r.stderr}`);
        assert.match(r.stdout, /^1000\r?\n$/, label);
      }
      const w = await api(d, 'PUT', `/v1/sandboxes/${SB}/fs/write?path=planted-check`, new Uint8Array(1));
      assert.equal(w.status, 204, w.text);
      const ran = await sh(d, SB, 'cat /tmp/planted-ran 2>/dev/null; rm -rf ~/.local/bin ~/bin; true');
      assert.equal(ran.stdout, '', 'a planted helper ran');
    });

    it('shows no host path in mountinfo, cgroup or fd links, and keeps the init FIFO directory out of reach', async () => {
      const tenants = readdirSync(path.join(d.dataDir, 'tenants'));
      const r = await sh(
        d,
        SB,
        'cat /proc/self/mountinfo /proc/self/cgroup; for f in /proc/self/fd/*; do readlink $f || true; done; ls /proc/1/fd/9/ 2>&1; true',
      );
      for (const leak of [d.dataDir, ...tenants, 'paddock-sandboxd', 'tenants/'])
        assert.ok(!r.stdout.includes(leak), `${leak} visible inside:\n${r.stdout}`);
      assert.match(r.stdout, /\/proc\/1\/fd\/9\/.*Permission denied/);
    });

    it("runs root execs as uid 0 of the sandbox's own namespace: the base is its own, the host's /usr is not", async () => {
      const r = await sh(
        d,
        SB,
        'id -u; echo x > /etc/rootless-root && echo etc-ok; touch /usr/bin/evil-root; cat /proc/self/uid_map',
        { user: 'root' },
      );
      assert.equal(r.exitCode, 0, r.stderr);
      const lines = r.stdout.trim().split('\n');
      assert.deepEqual(lines.slice(0, 2), ['0', 'etc-ok']);
      // uid 0 maps to the service user (0 of the outer namespace), nothing else: no capability over the
      // sandbox's mounts, and host root's /usr stays read-only (docs/sandboxd.md, "System packages").
      assert.deepEqual(lines[2]!.trim().split(/\s+/), ['0', '0', '1']);
      assert.match(r.stderr, /\/usr\/bin\/evil-root.*Permission denied/);
      const remount = await sh(d, SB, 'mount -o remount,rw /usr 2>&1; umount /proc 2>&1; echo end', {
        user: 'root',
      });
      assert.match(remount.stdout, /end\n$/);
      assert.doesNotMatch(remount.stdout, /^end\n$/);
      assert.equal((await sh(d, SB, 'test -r /proc/self/status && echo proc')).stdout, 'proc\n');
    });

    it('recovers when the sandbox user kills the holder of its user namespace', async () => {
      // Rootless, sandbox processes have the holder's host uid, so the kill succeeds.
      await sh(d, SB, 'pkill -9 -x sleep; true');
      const r = await sh(d, SB, 'echo alive');
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.stdout, 'alive\n');
    });

    it('checkpoints and restores the filesystem, base whiteouts and unreadable files included', async () => {
      const setup = await sh(
        d,
        SB,
        `set -e; mkdir -p ~/data/dir; echo one > ~/data/dir/a; ln -s dir/a ~/data/link
         echo secret > ~/data/locked-file; mkdir ~/data/locked-dir; echo x > ~/data/locked-dir/x
         chmod 000 ~/data/locked-file ~/data/locked-dir
         rm /etc/hostname; rm -r /etc/skel; mv /etc/ssl /etc/ssl-moved`,
      );
      assert.equal(setup.exitCode, 0, setup.stderr);
      const MANIFEST =
        'cd ~/data && find . -printf "%p %y %m %U %l\\n" | sort; cat dir/a; ls -d /etc/hostname /etc/skel /etc/ssl /etc/ssl-moved 2>&1; true';
      const before = await sh(d, SB, MANIFEST);
      assert.match(before.stdout, /\.\/locked-dir d 0 1000/);

      const ck = await api(d, 'POST', `/v1/sandboxes/${SB}/checkpoint`);
      assert.equal(ck.status, 200);
      const lines = ndjsonLines(ck.text);
      assert.ok(!lines.some((l) => l['type'] === 'error'), ck.text);
      const id = checkpointIdOf(lines) as string;
      assert.match(id, /^ckpt-[0-9a-f]{16}$/);

      await sh(d, SB, 'echo two > ~/data/dir/a; echo later > ~/data/later; mkdir /etc/skel');
      const restore = await api(d, 'POST', `/v1/sandboxes/${SB}/checkpoints/${id}/restore`);
      assert.equal(restore.status, 200);
      assert.ok(!ndjsonLines(restore.text).some((l) => l['type'] === 'error'), restore.text);
      const after = await sh(d, SB, MANIFEST);
      assert.equal(after.stdout, before.stdout);
      assert.match(after.stdout, /^one$/m);
      assert.match(after.stdout, /\/etc\/skel.*No such file/);
      assert.doesNotMatch(after.stdout, /later/);
    });

    it('destroys the sandbox and leaves no process behind', async () => {
      const sandboxes = readdirSync(path.join(d.dataDir, 'tenants')).map((t) =>
        path.join(d.dataDir, 'tenants', t, 'sandboxes', SB),
      );
      const rec = JSON.parse(readFileSync(path.join(sandboxes[0]!, 'sandbox.json'), 'utf8')) as {
        init: { pid: number };
      };
      const ns = readlinkSync(`/proc/${rec.init.pid}/ns/pid`);
      // A background process that would outlive a careless destroy.
      await sh(d, SB, 'nohup sleep 1000 >/dev/null 2>&1 &');
      assert.ok(pidsIn(ns).length >= 3);
      assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${SB}`)).status, 204);
      await waitFor(() => pidsIn(ns).length === 0, `no process in the sandbox (left: ${pidsIn(ns)})`, 3000);
      assert.equal((await api(d, 'GET', `/v1/sandboxes/${SB}`)).status, 404);
      assert.throws(() => statSync(sandboxes[0]!), /ENOENT/);
    });
  });
}
