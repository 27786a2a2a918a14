import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SandboxApiError, SandboxOperationError } from '../errors.ts';
import { type ConformanceContext, workDirOf } from './context.ts';

/**
 * A listing of everything under `root` (the suite's directory in the sandbox) that restore must reproduce: paths,
 * types, permission bits, file sizes, symlink targets and file contents
 * (SHA-256). Modification times are not part of it.
 */
const manifestScript = (root: string): string =>
  `cd ${root} && export LC_ALL=C && ` +
  `find . -printf '%p %y %m\\n' | sort && ` +
  `find . -type f -printf '%p %s\\n' | sort && ` +
  `find . -type l -printf '%p -> %l\\n' | sort && ` +
  `find . -type f -print0 | sort -z | xargs -0 -r sha256sum`;

const setupScript = (root: string): string =>
  [
    `mkdir -p ${root}/dir/nested ${root}/empty`,
    `head -c 3145728 /dev/urandom > ${root}/dir/random.bin`,
    `printf 'keep\\n' > ${root}/keep.txt`,
    `printf 'will change\\n' > ${root}/change.txt`,
    `printf 'will go\\n' > ${root}/dir/nested/delete-me.txt`,
    `chmod 750 ${root}/dir`,
    `chmod 600 ${root}/keep.txt`,
    `ln -s dir/random.bin ${root}/link`,
  ].join(' && ');

const modifyScript = (root: string): string =>
  [
    `cd ${root}`,
    `printf 'changed\\n' > change.txt`,
    'rm dir/nested/delete-me.txt',
    'echo new > added.txt',
    'chmod 644 keep.txt',
    'rmdir empty',
    'printf XXXXXXXXXX | dd of=dir/random.bin bs=1 seek=100 conv=notrunc 2>/dev/null',
    'rm link && ln -s keep.txt link',
    'rm tool.sh',
  ].join(' && ');

export function registerCheckpointTests(ctx: () => ConformanceContext): void {
  describe('checkpoints', () => {
    let name = '';
    let root = '';
    before(async () => {
      name = await ctx().create('checkpoint');
      root = `${await workDirOf(ctx(), name)}/cp`;
    });
    after(async () => {
      if (name) await ctx().client.destroy(name);
    });

    const run = async (script: string): Promise<string> => {
      const result = await ctx().client.exec(name, { cmd: ['sh', '-c', script], timeoutMs: 120_000 });
      assert.equal(result.exitCode, 0, `${script}\n${result.stderr.toString()}`);
      return result.stdout.toString();
    };

    it('checkpoint → modify → restore reproduces the filesystem byte for byte', {
      timeout: 300_000,
    }, async () => {
      const { client } = ctx();
      await run(setupScript(root));
      await client.writeFile(name, `${root}/tool.sh`, '#!/bin/sh\necho tool\n', { mode: 0o711 });
      const original = await run(manifestScript(root));
      assert.match(original, /random\.bin 3145728/);

      const first = await client.createCheckpoint(name, {
        comment: 'conformance: original',
        timeoutMs: 120_000,
      });
      assert.ok(first.id.length > 0, 'the stream surfaces the checkpoint id');
      assert.ok(
        first.events.every((event) => event.type !== 'error'),
        'no error line',
      );

      await run(modifyScript(root));
      const modified = await run(manifestScript(root));
      assert.notEqual(modified, original);

      const second = await client.createCheckpoint(name, { timeoutMs: 120_000 });
      assert.notEqual(second.id, first.id, 'each checkpoint has its own id');

      await client.restoreCheckpoint(name, first.id, { timeoutMs: 120_000 });
      assert.equal(await run(manifestScript(root)), original);
      assert.equal(await run(`${root}/tool.sh`), 'tool\n');

      await client.restoreCheckpoint(name, second.id, { timeoutMs: 120_000 });
      assert.equal(await run(manifestScript(root)), modified);
    });

    it('deletes a checkpoint: it cannot be restored any more, and a second delete still succeeds', {
      timeout: 120_000,
    }, async () => {
      const { client } = ctx();
      await run(`mkdir -p ${root} && echo doomed > ${root}/doomed.txt`);
      const doomed = await client.createCheckpoint(name, { timeoutMs: 120_000 });
      await client.deleteCheckpoint(name, doomed.id);
      const error = await client
        .restoreCheckpoint(name, doomed.id, { timeoutMs: 120_000 })
        .catch((caught: unknown) => caught);
      assert.ok(
        (error instanceof SandboxApiError && error.status >= 400 && error.status < 500) ||
          error instanceof SandboxOperationError,
        `expected a 4xx or an error line, got ${String(error)}`,
      );
      await client.deleteCheckpoint(name, doomed.id);
    });

    it('fails a restore of an unknown checkpoint', async () => {
      const error = await ctx()
        .client.restoreCheckpoint(name, 'no-such-checkpoint')
        .catch((caught: unknown) => caught);
      assert.ok(
        (error instanceof SandboxApiError && error.status >= 400 && error.status < 500) ||
          error instanceof SandboxOperationError,
        `expected a 4xx or an error line, got ${String(error)}`,
      );
    });
  });
}
