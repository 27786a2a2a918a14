/** Detachable exec sessions survive a sandboxd restart (session shims, src/exec/shim.ts). */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { WebSocket } from 'ws';
import { SHIM_POOL_SIZE } from '../src/exec/shim-pool.ts';
import { idleShims, processAlive, sessionShims, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, attach, collect, type ListedSession, listSessions, openExec, sh, waitFor } from './helpers.ts';

let d: TestSandboxd;
let dataDir = '';
const SB = 'restart-sessions';

async function restart(): Promise<void> {
  await d.stop({ keepData: true });
  d = await startTestSandboxd({ dataDir, token: d.token });
}

async function listed(id: string): Promise<ListedSession | undefined> {
  return (await listSessions(d, SB)).find((s) => s.id === id);
}

/** Starts a detachable session, waits for `marker` in its output, and drops the socket. */
async function startDetached(
  cmd: string[],
  marker: string,
  o: { tty?: boolean; stdin?: boolean } = {},
): Promise<string> {
  const ws: WebSocket = openExec(d, SB, cmd, {
    detachable: true,
    tty: o.tty ?? false,
    ...(o.stdin ? { stdin: '' } : {}),
  });
  const done = collect(ws, o.tty ?? false, 20_000);
  let id = '';
  let seen = '';
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary) id = (JSON.parse(data.toString()) as { session_id?: string }).session_id ?? id;
    else seen += (o.tty ? data : data.subarray(1)).toString();
  });
  await waitFor(() => seen.includes(marker), `${marker} in the output`);
  ws.terminate();
  await done;
  return id;
}

function sessionDir(id: string): string {
  const tenants = readdirSync(path.join(dataDir, 'tenants'));
  return path.join(dataDir, 'tenants', tenants[0]!, 'sandboxes', SB, 'sessions', id);
}

before(async () => {
  d = await startTestSandboxd();
  dataDir = d.dataDir;
  assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: SB })).status, 201);
  assert.equal((await sh(d, SB, 'true')).exitCode, 0);
});
after(async () => {
  await api(d, 'DELETE', `/v1/sandboxes/${SB}`);
  await d.stop();
  // No shim of this daemon (nor its socket: the data dir is gone) outlives the tests.
  await waitFor(() => sessionShims(dataDir).length === 0, 'no session shims left');
  assert.equal(existsSync(dataDir), false);
});

describe('exec sessions across a sandboxd restart', () => {
  it('keeps a detachable session running, lists it, and replays everything (also while down) on attach', async () => {
    const script =
      'echo start; i=0; while [ ! -f /tmp/go-1 ]; do i=$((i+1)); echo "line $i"; echo "err $i" >&2; sleep 0.05; done; echo done; exit 4';
    const id = await startDetached(['sh', '-c', script], 'line 2');
    const before = await listed(id);
    assert.equal(before?.exited, false);
    const shims = sessionShims(dataDir);
    assert.equal(shims.length, 1);

    await d.stop({ keepData: true });
    await new Promise((r) => setTimeout(r, 500)); // the session writes on while sandboxd is down
    d = await startTestSandboxd({ dataDir, token: d.token });

    const after = await listed(id);
    assert.ok(after, 'listed after the restart');
    assert.equal(after.exited, false);
    assert.equal(after.is_active, false);
    assert.equal(after.detachable, true);
    assert.deepEqual(sessionShims(dataDir), shims, 'the same shim');

    const a = attach(d, SB, id);
    const replay = collect(a, false, 20_000);
    await new Promise((r) => a.once('open', r));
    await new Promise((r) => setTimeout(r, 200));
    await sh(d, SB, 'touch /tmp/go-1');
    const r = await replay;
    assert.equal(r.exitCode, 4);
    assert.equal(r.info?.['session_id'], id);
    assert.equal(r.info?.['is_owner'], false);
    assert.deepEqual(r.info?.['replay_dropped_bytes'], { stdout: 0, stderr: 0 });
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines[0], 'start');
    assert.equal(lines.at(-1), 'done');
    const numbers = lines.slice(1, -1).map((l) => Number(/^line (\d+)$/.exec(l)?.[1]));
    // Every line from the first on, none lost or duplicated, including ~10 written while sandboxd was down.
    assert.deepEqual(
      numbers,
      numbers.map((_, i) => i + 1),
    );
    assert.ok(numbers.length >= 10, `only ${numbers.length} lines`);
    assert.equal(r.stderr, numbers.map((n) => `err ${n}\n`).join(''));
    await waitFor(async () => (await listed(id))?.exit_code === 4, 'exit code listed');
    await waitFor(() => sessionShims(dataDir).length === 0, 'the shim exits with its session');
  });

  it('reports the exit code of a session that finished while sandboxd was down, across restarts', async () => {
    const id = await startDetached(
      ['sh', '-c', 'echo hello; while [ ! -f /tmp/go-2 ]; do sleep 0.05; done; echo bye >&2; exit 9'],
      'hello',
    );
    await d.stop({ keepData: true });
    // The session finishes while sandboxd is down (the file is written by a process of the sandbox).
    const { spawnSync } = await import('node:child_process');
    const tenants = readdirSync(path.join(dataDir, 'tenants'));
    const rec = (await import('node:fs')).readFileSync(
      path.join(dataDir, 'tenants', tenants[0]!, 'sandboxes', SB, 'sandbox.json'),
      'utf8',
    );
    const initPid = (JSON.parse(rec) as { init: { pid: number } }).init.pid;
    // As the daemon does (namespaces.ts execArgv): without root, setns into the sandbox's mount namespace
    // needs CAP_SYS_ADMIN in the user namespace that owns it, so enter that user namespace first.
    const enterMount = ['-t', String(initPid), '-m', '--', 'touch', '/tmp/go-2'];
    const touched =
      process.getuid?.() === 0
        ? spawnSync('nsenter', enterMount)
        : spawnSync('nsenter', [
            `--user=/proc/${initPid}/ns/user`,
            '--preserve-credentials',
            '--',
            'nsenter',
            ...enterMount,
          ]);
    assert.equal(touched.status, 0, touched.stderr?.toString());
    await waitFor(() => existsSync(path.join(sessionDir(id), 'result.json')), 'result recorded by the shim');
    await waitFor(() => sessionShims(dataDir).length === 0, 'the shim exits with its session');
    assert.equal(existsSync(path.join(sessionDir(id), 'shim.sock')), false, 'no socket left');

    for (let round = 0; round < 2; round++) {
      if (round > 0) await restart();
      else d = await startTestSandboxd({ dataDir, token: d.token });
      const s = await listed(id);
      assert.equal(s?.exited, true);
      assert.equal(s?.exit_code, 9);
      const r = await collect(attach(d, SB, id), false, 10_000);
      assert.equal(r.stdout, 'hello\n');
      assert.equal(r.stderr, 'bye\n');
      assert.equal(r.exitCode, 9);
    }
  });

  it('passes stdin and TTY input to shim sessions started before a restart', async () => {
    const id = await startDetached(['sh', '-c', 'echo ready; cat; echo eof'], 'ready', { stdin: true });
    const ttyId = await startDetached(['sh', '-c', 'echo ready; read x; echo "got $x"; exit 6'], 'ready', {
      tty: true,
    });

    await restart();

    const a = attach(d, SB, id);
    const r = collect(a, false, 20_000);
    await new Promise((res) => a.once('open', res));
    a.send(Buffer.concat([Buffer.from([0]), Buffer.from('typed after restart\n')]));
    a.send(Buffer.from([4]));
    const out = await r;
    assert.equal(out.stdout, 'ready\ntyped after restart\neof\n');
    assert.equal(out.exitCode, 0);

    const t = attach(d, SB, ttyId);
    const tr = collect(t, true, 20_000);
    await new Promise((res) => t.once('open', res));
    t.send(JSON.stringify({ type: 'resize', rows: 40, cols: 100 }));
    t.send(Buffer.from('hi\r'));
    const tout = await tr;
    assert.match(tout.stdout, /got hi/);
    assert.equal(tout.exitCode, 6);
  });

  it('kills the shims of a destroyed sandbox', async () => {
    const name = 'restart-destroyed';
    assert.equal((await api(d, 'POST', '/v1/sandboxes', { name })).status, 201);
    // The shims of this sandbox's sessions, by pid: a shim of an earlier test may still be exiting
    // while these start, so a count of all session shims would race with it.
    const before = new Set(sessionShims(dataDir));
    const started = () => sessionShims(dataDir).filter((pid) => !before.has(pid));
    for (const tty of [false, true]) {
      const ws = openExec(d, name, ['sh', '-c', 'echo up; sleep 600'], { detachable: true, tty });
      const c = collect(ws, tty, 20_000);
      let seen = '';
      ws.on('message', (data: Buffer) => {
        seen += data.toString();
      });
      await waitFor(() => seen.includes('up'), 'up');
      ws.terminate();
      await c;
    }
    const ours = started();
    assert.equal(ours.length, 2, 'one shim per detachable session');
    assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${name}`)).status, 204);
    await waitFor(() => ours.every((pid) => !processAlive(pid)), 'shims killed');
  });

  it('starts a detachable session under a pre-started shim, and leaves no idle shim behind when stopped or killed', async () => {
    for (const how of ['SIGTERM', 'SIGKILL'] as const) {
      await sh(d, SB, 'true'); // an exec fills the pool
      await waitFor(() => idleShims(d.pid).length === SHIM_POOL_SIZE, 'pre-started shims');
      const pooled = idleShims(d.pid);
      const go = `/tmp/go-pooled-${how}`;
      const id = await startDetached(
        ['sh', '-c', `echo pooled; while [ ! -f ${go} ]; do sleep 0.05; done`],
        'pooled',
      );
      const serving = sessionShims(dataDir).filter((pid) => pooled.includes(pid));
      assert.equal(serving.length, 1, 'the session runs under a pre-started shim');
      assert.ok(existsSync(path.join(sessionDir(id), 'session.json')));
      await waitFor(() => idleShims(d.pid).length === SHIM_POOL_SIZE, 'the pool refilled');
      const idle = idleShims(d.pid);
      if (how === 'SIGKILL') process.kill(d.pid, 'SIGKILL');
      await d.stop({ keepData: true });
      await waitFor(() => idle.every((pid) => !processAlive(pid)), `no idle shim left after ${how}`);
      assert.ok(processAlive(serving[0]!), 'the session (its shim) outlives sandboxd');
      d = await startTestSandboxd({ dataDir, token: d.token });
      assert.equal((await listed(id))?.exited, false, 'the session is found again');
      await sh(d, SB, `touch ${go}`);
      await waitFor(async () => (await listed(id))?.exited === true, 'the session ends');
    }
  });
});
