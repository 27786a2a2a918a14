import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SandboxApiError } from '../errors.ts';
import { type ConformanceContext, workDirOf } from './context.ts';

export function registerFileTests(ctx: () => ConformanceContext): void {
  describe('write file', () => {
    let name = '';
    let dir = '';
    before(async () => {
      name = await ctx().create('files');
      dir = `${await workDirOf(ctx(), name)}/files`;
    });
    after(async () => {
      if (name) await ctx().client.destroy(name);
    });

    const run = async (script: string): Promise<string> => {
      const result = await ctx().client.exec(name, { cmd: ['sh', '-c', script], timeoutMs: 30_000 });
      assert.equal(result.exitCode, 0, `${script}: ${result.stderr.toString()}`);
      return result.stdout.toString();
    };

    it('writes raw bytes with the given mode, creating parents when asked', async () => {
      const content = Buffer.concat([Buffer.from([0, 255, 10, 13]), randomBytes(64 * 1024)]);
      await ctx().client.writeFile(name, `${dir}/a/b/data.bin`, content, {
        mode: 0o640,
        mkdirParents: true,
      });
      assert.equal(await run(`stat -c '%a %s' ${dir}/a/b/data.bin`), `640 ${content.length}\n`);
      const read = await ctx().client.exec(name, { cmd: ['cat', `${dir}/a/b/data.bin`] });
      assert.ok(read.stdout.equals(content), 'the file holds exactly the bytes written');
    });

    it('writes an executable script that then runs', async () => {
      await ctx().client.writeFile(name, `${dir}/run.sh`, '#!/bin/sh\necho ran-$1\n', {
        mode: '0755',
        mkdirParents: true,
      });
      const result = await ctx().client.exec(name, { cmd: [`${dir}/run.sh`, 'ok'] });
      assert.equal(result.exitCode, 0);
      assert.equal(result.stdout.toString(), 'ran-ok\n');
    });

    it('replaces an existing file entirely', async () => {
      await ctx().client.writeFile(name, `${dir}/over.txt`, 'a long first version\n', {
        mkdirParents: true,
      });
      await ctx().client.writeFile(name, `${dir}/over.txt`, 'short\n');
      assert.equal(await run(`cat ${dir}/over.txt`), 'short\n');
    });

    it('resolves a relative path against workingDir', async () => {
      await ctx().client.writeFile(name, 'relative.txt', 'rel\n', {
        workingDir: `${dir}`,
        mkdirParents: true,
      });
      assert.equal(await run(`cat ${dir}/relative.txt`), 'rel\n');
    });

    it('refuses with a 4xx to write under a missing directory without mkdirParents', async () => {
      const error = await ctx()
        .client.writeFile(name, `${dir}/missing/dir/file.txt`, 'x', { mkdirParents: false })
        .catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError, `expected an API error, got ${String(error)}`);
      assert.ok(error.status >= 400 && error.status < 500, `status ${error.status}`);
    });

    it('answers 404 for a missing sandbox', async () => {
      const error = await ctx()
        .client.writeFile(ctx().name('ghost'), '/x', 'x')
        .catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError);
      assert.equal(error.status, 404);
    });
  });
}
