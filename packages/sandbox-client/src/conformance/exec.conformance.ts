import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { SandboxApiError } from '../errors.ts';
import type { ConformanceContext } from './context.ts';

export function registerExecTests(ctx: () => ConformanceContext): void {
  describe('exec', () => {
    let name = '';
    before(async () => {
      name = await ctx().create('exec');
    });
    after(async () => {
      if (name) await ctx().client.destroy(name);
    });
    const sh = (script: string, extra: { stdin?: string | Buffer | Readable } = {}) =>
      ctx().client.exec(name, { cmd: ['sh', '-c', script], timeoutMs: 60_000, ...extra });

    it('reports exit codes 0, 3 and 255', async () => {
      assert.equal((await ctx().client.exec(name, { cmd: ['true'] })).exitCode, 0);
      assert.equal((await sh('exit 3')).exitCode, 3);
      assert.equal((await sh('exit 255')).exitCode, 255);
    });

    it('keeps stdout and stderr apart', async () => {
      const result = await sh('echo out-1; echo err-1 >&2; echo out-2; echo err-2 >&2; exit 1');
      assert.equal(result.exitCode, 1);
      assert.equal(result.stdout.toString(), 'out-1\nout-2\n');
      assert.equal(result.stderr.toString(), 'err-1\nerr-2\n');
    });

    it('delivers stdin byte for byte, then EOF', async () => {
      const input = randomBytes(512 * 1024);
      const echoed = await ctx().client.exec(name, { cmd: ['cat'], stdin: input, timeoutMs: 60_000 });
      assert.equal(echoed.exitCode, 0);
      assert.ok(echoed.stdout.equals(input), 'cat echoes the exact bytes');

      // `cat` only returns once stdin is at EOF: the command after it proves EOF arrived.
      const streamed = await sh('cat; echo "<eof>"', {
        stdin: Readable.from([Buffer.from('one '), Buffer.from('two')]),
      });
      assert.equal(streamed.stdout.toString(), 'one two<eof>\n');
    });

    it('gives a command without stdin an immediate EOF', async () => {
      const result = await sh('cat; echo done');
      assert.equal(result.exitCode, 0);
      assert.equal(result.stdout.toString(), 'done\n');
    });

    it('passes env entries verbatim and runs in dir', async () => {
      const result = await ctx().client.exec(name, {
        cmd: ['sh', '-c', 'printf "%s|%s|" "$FIRST" "$SECOND"; pwd'],
        env: { FIRST: 'a b=c', SECOND: 'ünïcode $HOME' },
        dir: '/tmp',
      });
      assert.equal(result.exitCode, 0, result.stderr.toString());
      assert.equal(result.stdout.toString(), 'a b=c|ünïcode $HOME|/tmp\n');
    });

    it("runs a command as the sandbox's root with user: 'root'", async () => {
      const result = await ctx().client.exec(name, { cmd: ['id', '-u'], user: 'root' });
      assert.equal(result.exitCode, 0, result.stderr.toString());
      assert.equal(result.stdout.toString(), '0\n');
    });

    it('passes argv entries without a shell in between', async () => {
      const result = await ctx().client.exec(name, { cmd: ['printf', '[%s]', 'a b', '$x', '', "'q'"] });
      assert.equal(result.stdout.toString(), "[a b][$x][]['q']");
    });

    it('streams a large output completely and in order', async () => {
      const result = await sh(
        'i=0; while [ $i -lt 20000 ]; do echo "line-$i"; i=$((i+1)); done; head -c 4194304 /dev/zero',
      );
      const text = result.stdout.subarray(0, result.stdout.length - 4 * 1024 * 1024).toString();
      const lines = text.split('\n');
      assert.equal(lines.length, 20001);
      assert.equal(lines[19999], 'line-19999');
      assert.equal(result.stdout.length, text.length + 4 * 1024 * 1024);
      const expected = createHash('sha256')
        .update(Buffer.alloc(4 * 1024 * 1024))
        .digest('hex');
      assert.equal(createHash('sha256').update(result.stdout.subarray(text.length)).digest('hex'), expected);
    });

    it('cancels an exec through its signal: the call rejects with the reason and the command ends', async () => {
      const marker = `/tmp/aborted-${randomBytes(4).toString('hex')}`;
      const controller = new AbortController();
      const running = ctx().client.exec(name, {
        cmd: ['sh', '-c', `echo $$ > ${marker}; exec sleep 300`],
        signal: controller.signal,
      });
      let pid = '';
      for (let i = 0; i < 200 && !pid; i++) {
        pid = (await sh(`cat ${marker} 2>/dev/null`)).stdout.toString().trim();
        if (!pid) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.match(pid, /^\d+$/, 'the command started');
      const reason = new Error('cancelled by the test');
      controller.abort(reason);
      await assert.rejects(running, (error) => error === reason);
      let alive = true;
      for (let i = 0; i < 100 && alive; i++) {
        alive = (await sh(`kill -0 ${pid} 2>/dev/null`)).exitCode === 0;
        if (alive) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.equal(alive, false, 'the cancelled command is gone');
      // An already aborted signal sends nothing.
      await assert.rejects(
        ctx().client.exec(name, { cmd: ['sh', '-c', `echo ran > ${marker}`], signal: controller.signal }),
        (error) => error === reason,
      );
      assert.equal((await sh(`cat ${marker}`)).stdout.toString().trim(), pid);
    });

    it('refuses an exec on a missing sandbox with 404', async () => {
      const error = await ctx()
        .client.exec(ctx().name('ghost'), { cmd: ['true'] })
        .catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError, `expected an API error, got ${String(error)}`);
      assert.equal(error.status, 404);
    });
  });

  describe('exec with a TTY', () => {
    let name = '';
    before(async () => {
      name = await ctx().create('tty');
    });
    after(async () => {
      if (name) await ctx().client.destroy(name);
    });

    it('runs on a terminal of the requested size, applies a resize and reports the exit code', async () => {
      let output = '';
      const handle = await ctx().client.execStream(name, {
        cmd: [
          'sh',
          '-c',
          'test -t 0 && test -t 1 && echo is-a-tty; stty size; read line; stty size; echo "got:$line"; exit 7',
        ],
        tty: true,
        rows: 30,
        cols: 100,
        timeoutMs: 30_000,
        onStdout: (chunk) => {
          output += chunk.toString();
        },
      });
      assert.equal(handle.tty, true);
      await until(() => output.includes('30 100'), 'the initial size is 30 × 100');
      handle.resize(120, 40);
      await handle.write('go\r');
      const code = await handle.exited;
      assert.match(output, /is-a-tty/);
      assert.match(output, /40 120/, `the resized terminal is 40 × 120: ${JSON.stringify(output)}`);
      assert.match(output, /got:go/);
      assert.equal(code, 7);
    });
  });
}

export async function until(condition: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
