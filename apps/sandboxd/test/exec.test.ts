import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sessionShims, startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, attach, collect, exec, listSessions, openExec, sh, waitFor } from './helpers.ts';

let d: TestSandboxd;
const SB = 'exec-tests';

before(async () => {
  d = await startTestSandboxd();
  assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: SB })).status, 201);
});
after(async () => {
  await api(d, 'DELETE', `/v1/sandboxes/${SB}`);
  await d.stop();
});

describe('exec', () => {
  it('reports exit codes and separates stdout from stderr', async () => {
    const r = await sh(d, SB, 'echo out; echo err >&2; exit 7');
    assert.equal(r.exitCode, 7);
    assert.equal(r.stdout, 'out\n');
    assert.equal(r.stderr, 'err\n');
    assert.equal((await exec(d, SB, ['true'])).exitCode, 0);
    assert.equal((await exec(d, SB, ['false'])).exitCode, 1);
  });

  it('reports 127 for a missing command and 128+n for a signal', async () => {
    assert.equal((await exec(d, SB, ['no-such-command-xyz'])).exitCode, 127);
    assert.equal((await sh(d, SB, 'kill -9 $$')).exitCode, 137);
  });

  it('runs as the sandbox user in its home by default', async () => {
    const r = await sh(d, SB, 'id -un; pwd; echo $HOME');
    assert.equal(r.stdout, 'sandbox\n/home/sandbox\n/home/sandbox\n');
  });

  it('passes stdin through until stdin EOF', async () => {
    const r = await exec(d, SB, ['sh', '-c', 'wc -c; cat /dev/null'], { stdin: Buffer.alloc(100_000, 'x') });
    assert.equal(r.stdout.trim(), '100000');
    const r2 = await exec(d, SB, ['cat'], { stdin: 'hello\nworld\n' });
    assert.equal(r2.stdout, 'hello\nworld\n');
    assert.equal(r2.exitCode, 0);
  });

  it('gives non-TTY sessions pipes: /dev/stdout, /dev/stderr and /dev/stdin reopen by path', async () => {
    for (const detachable of [false, true]) {
      const r = await sh(d, SB, 'echo hi > /dev/stdout; echo err > /dev/stderr', { detachable });
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.stdout, 'hi\n', `detachable=${detachable}`);
      assert.equal(r.stderr, 'err\n', `detachable=${detachable}`);
      const tee = await sh(d, SB, 'echo x | tee /dev/stderr', { detachable });
      assert.equal(tee.exitCode, 0, tee.stderr);
      assert.equal(tee.stdout, 'x\n');
      assert.equal(tee.stderr, 'x\n');
      const types = await sh(d, SB, 'for f in 0 1 2; do stat -L -c %F /proc/self/fd/$f; done', {
        detachable,
      });
      assert.equal(types.stdout, 'character special file\nfifo\nfifo\n', 'stdin is /dev/null without stdin');
      // Re-opened after the client's stdin EOF too (a named FIFO's open would wait for a writer).
      const cat = await exec(d, SB, ['sh', '-c', 'sleep 0.2; cat /dev/stdin; stat -L -c %F /dev/stdin'], {
        stdin: 'piped\n',
        detachable,
      });
      assert.equal(cat.stdout, 'piped\nfifo\n');
      assert.equal(cat.exitCode, 0);
    }
  });

  it('applies env and dir', async () => {
    await sh(d, SB, 'mkdir -p /tmp/work-dir');
    const r = await sh(d, SB, 'echo "$FOO|$BAR"; pwd', {
      env: { FOO: 'a=b c', BAR: 'x' },
      dir: '/tmp/work-dir',
    });
    assert.equal(r.stdout, 'a=b c|x\n/tmp/work-dir\n');
    const proxy = await sh(d, SB, 'echo $HTTPS_PROXY $https_proxy $ALL_PROXY $NO_PROXY $NODE_USE_ENV_PROXY');
    assert.match(
      proxy.stdout,
      /^http:\/\/127\.0\.0\.1:\d+ http:\/\/127\.0\.0\.1:\d+ socks5h:\/\/127\.0\.0\.1:\d+ localhost,127\.0\.0\.1,::1 1\n$/,
    );
  });

  it('takes an env far beyond 16 KiB (the request head carries it), detachable or not', async () => {
    const env = {
      BIG1: 'a'.repeat(64 * 1024),
      BIG2: 'é'.repeat(32 * 1024),
      BIG3: `${'b'.repeat(60 * 1024)}'$x`,
    };
    for (const detachable of [false, true]) {
      const r = await exec(
        d,
        SB,
        ['sh', '-c', 'printf "%s %s %s" ${#BIG1} $(printf %s "$BIG2" | wc -c) "${BIG3#"${BIG3%????}"}"'],
        {
          env,
          detachable,
        },
      );
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout, `65536 65536 b'$x`); // é is two bytes
    }
  });

  it('answers 400 with the reason to an exec Linux would refuse (E2BIG), never echoing a value', async () => {
    const statusAndBody = (ws: ReturnType<typeof openExec>) =>
      new Promise<{ status: number; body: string }>((resolve) => {
        ws.on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (d: Buffer) => {
            body += d.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.on('open', () => resolve({ status: 101, body: '' }));
        ws.on('error', () => {});
      });
    const one = await statusAndBody(openExec(d, SB, ['true'], { env: { HUGE: 's3cr3t'.repeat(30_000) } }));
    assert.equal(one.status, 400);
    assert.match(
      one.body,
      /environment variable HUGE is 176 KiB; Linux takes at most 128 KiB per variable \(E2BIG\)/,
    );
    assert.ok(!one.body.includes('s3cr3t'));
    const many: Record<string, string> = {};
    for (let i = 0; i < 40; i++) many[`V${i}`] = 'v'.repeat(64 * 1024);
    const all = await statusAndBody(openExec(d, SB, ['true'], { env: many }));
    assert.equal(all.status, 400);
    assert.match(
      all.body,
      /the command and its environment take \d+ KiB; Linux starts a process with at most \d+ KiB of them \(E2BIG\)/,
    );
    // Just under: 24 × 64 KiB starts.
    const under = Object.fromEntries(Object.entries(many).slice(0, 24));
    const r = await exec(d, SB, ['sh', '-c', 'echo ${#V23}'], { env: under });
    assert.equal(r.stdout, '65536\n');
  });

  it('answers 400 to an upgrade without cmd and 404 for an unknown sandbox, 401 without a token', async () => {
    const statusOf = (ws: ReturnType<typeof openExec>) =>
      new Promise<number>((resolve) => {
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('open', () => resolve(101));
        ws.on('error', () => {});
      });
    assert.equal(await statusOf(openExec(d, 'missing-sandbox', ['true'])), 404);
    assert.equal(await statusOf(openExec({ url: d.url, token: 'wrong' }, SB, ['true'])), 401);
    assert.equal(await statusOf(openExec(d, SB, ['true'], { env: { '': 'x' } })), 400);
    assert.equal(await statusOf(openExec(d, SB, [''])), 400);
  });

  it('runs TTY sessions through a pty with resize and a JSON exit frame', async () => {
    const ws = openExec(d, SB, ['sh', '-c', 'stty size; read line; stty size; exit 5'], {
      tty: true,
      rows: 30,
      cols: 100,
    });
    const done = collect(ws, true, 20_000);
    let out = '';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) out += data.toString();
    });
    await new Promise((r) => ws.once('open', r));
    await waitFor(() => out.includes('30 100'), 'initial tty size');
    ws.send(JSON.stringify({ type: 'resize', rows: 40, cols: 132 }));
    await new Promise((r) => setTimeout(r, 100));
    ws.send(Buffer.from('go\r'));
    const r = await done;
    assert.equal(r.exitCode, 5);
    assert.match(r.stdout, /30 100/);
    assert.match(r.stdout, /40 132/);
    assert.deepEqual(r.texts.at(-1), { type: 'exit', exit_code: 5 });
    assert.equal(r.info?.['tty'], true);
  });

  it('keeps a detached session running when the socket drops, lists it, and replays from the start on attach', async () => {
    const ws = openExec(
      d,
      SB,
      [
        'sh',
        '-c',
        'echo first; echo e1 >&2; while [ ! -f /tmp/go ]; do sleep 0.05; done; echo second; exit 3',
      ],
      {
        detachable: true,
      },
    );
    const first = collect(ws, false, 20_000);
    let id = '';
    let seen = '';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) id = (JSON.parse(data.toString()) as { session_id: string }).session_id ?? id;
      else seen += data.subarray(1).toString();
    });
    await waitFor(() => seen.includes('first'), 'first output');
    ws.terminate();
    await first;

    const listed = await waitFor(async () => {
      const s = (await listSessions(d, SB)).find((x) => x.id === id);
      return s && !s.is_active ? s : null;
    }, 'detached session listed as inactive');
    assert.equal(listed.is_active, false);
    assert.deepEqual(
      Object.keys(listed)
        .filter((k) => ['id', 'command', 'created', 'last_activity', 'is_active', 'tty'].includes(k))
        .sort(),
      ['command', 'created', 'id', 'is_active', 'last_activity', 'tty'],
    );

    const a = attach(d, SB, id);
    const replay = collect(a, false, 20_000);
    await new Promise((r) => a.once('open', r));
    assert.equal((await listSessions(d, SB)).find((x) => x.id === id)?.is_active, true);
    await sh(d, SB, 'touch /tmp/go');
    const r = await replay;
    assert.equal(r.stdout, 'first\nsecond\n');
    assert.equal(r.stderr, 'e1\n');
    assert.equal(r.exitCode, 3);
    assert.equal(r.info?.['session_id'], id);

    // A finished detachable session can still be attached: full replay, then the exit frame.
    const again = await collect(attach(d, SB, id), false, 10_000);
    assert.equal(again.stdout, 'first\nsecond\n');
    assert.equal(again.exitCode, 3);
  });

  it('kills a non-detachable exec when its socket drops', async () => {
    const ws = openExec(d, SB, ['sh', '-c', 'echo started; sleep 31; touch /tmp/should-not-exist']);
    const c = collect(ws, false, 20_000);
    let seen = '';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) seen += data.subarray(1).toString();
    });
    await waitFor(() => seen.includes('started'), 'started');
    ws.terminate();
    await c;
    const count = 'ps -eo args= | grep -cx "sleep 31" || true';
    await waitFor(async () => (await sh(d, SB, count)).stdout.trim() === '0', 'sleep killed');
    await waitFor(
      async () => !(await listSessions(d, SB)).some((s) => s.command.includes('sleep 31')),
      'killed session gone from the list',
    );
  });

  it('kills a blocking TTY exec when its socket drops: listed while it runs, then no process, shim or directory left', async () => {
    // A TTY exec runs under a session shim (sandboxd holds no pty), detached from sandboxd like a turn:
    // dropping its socket must still end it as it ends a piped one.
    const ws = openExec(d, SB, ['sh', '-c', 'echo started; sleep 32; touch /tmp/should-not-exist'], {
      tty: true,
    });
    const c = collect(ws, true, 20_000);
    let seen = '';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) seen += data.toString();
    });
    await waitFor(() => seen.includes('started'), 'started');
    const session = (await listSessions(d, SB)).find((s) => s.command.includes('sleep 32'));
    assert.ok(session, 'listed while it runs');
    assert.deepEqual([session.tty, session.detachable, session.is_active], [true, false, true]);
    assert.equal(sessionShims(d.dataDir).length, 1, 'one shim serves it');
    ws.terminate();
    await c;
    const count = 'ps -eo args= | grep -cx "sleep 32" || true';
    await waitFor(async () => (await sh(d, SB, count)).stdout.trim() === '0', 'sleep killed');
    await waitFor(
      async () => !(await listSessions(d, SB)).some((s) => s.id === session.id),
      'killed session gone from the list',
    );
    await waitFor(() => sessionShims(d.dataDir).length === 0, 'its shim gone');
    const tenant = readdirSync(path.join(d.dataDir, 'tenants'))[0]!;
    const sessions = path.join(d.dataDir, 'tenants', tenant, 'sandboxes', SB, 'sessions');
    await waitFor(() => !existsSync(path.join(sessions, session.id)), 'its session directory removed');
    assert.equal((await sh(d, SB, 'test -e /tmp/should-not-exist && echo yes || echo no')).stdout, 'no\n');
  });

  it('answers 404 when attaching to an unknown session', async () => {
    const ws = attach(d, SB, 'feedfacefeedface');
    const status = await new Promise<number>((resolve) => {
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', () => {});
    });
    assert.equal(status, 404);
  });
});
