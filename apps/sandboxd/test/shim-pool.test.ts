/**
 * The pool of pre-started session shims (src/exec/shim-pool.ts): a broken pipe of an idle shim costs that
 * shim, never sandboxd. A read error on a child's pipe is an 'error' event on its stream; without a listener
 * it is an uncaught exception, which ends the daemon and every session it serves.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, describe, it } from 'node:test';
import { ShimPool } from '../src/exec/shim-pool.ts';
import { createLogger } from '../src/log.ts';
import { waitFor } from './helpers.ts';

const dirs: string[] = [];
const pools: ShimPool[] = [];
const taken: ChildProcess[] = [];
after(() => {
  for (const pool of pools) pool.close();
  for (const child of taken) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('the session shim pool', () => {
  it('kills an idle shim whose stdout fails to read, and goes on with a fresh one', async () => {
    const compileCache = mkdtempSync(path.join(os.tmpdir(), 'shim-pool-'));
    dirs.push(compileCache);
    const logged: string[] = [];
    const out = new PassThrough();
    out.on('data', (line: Buffer) => logged.push(line.toString()));
    const log = createLogger('warn', out);
    const pool = new ShimPool({ size: 1, compileCache, log });
    pools.push(pool);
    pool.warm(0);
    // The pool's idle set is private: the test reaches in to break one pipe, as the kernel would.
    const idle = (pool as unknown as { idle: Set<ChildProcess> }).idle;
    await waitFor(() => idle.size === 1, 'one idle shim');
    const broken = [...idle][0]!;
    const exited = new Promise<NodeJS.Signals | null>((r) => broken.once('exit', (_c, signal) => r(signal)));
    broken.stdout!.destroy(Object.assign(new Error('read ENOTCONN'), { code: 'ENOTCONN', syscall: 'read' }));
    assert.equal(await exited, 'SIGKILL');
    assert.equal(idle.has(broken), false, 'the broken shim left the pool');
    assert.ok(logged.some((l) => l.includes('an idle session shim exited')));

    const next = pool.take();
    taken.push(next);
    assert.notEqual(next, broken);
    assert.equal(next.exitCode, null);
    assert.ok(next.pid && next.pid > 0);
  });
});
