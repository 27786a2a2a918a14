// files-tar.ts: a tar made by GNU tar, passed through redactTar, is still a tar GNU tar lists and
// extracts; files without a secret come out byte for byte, a file with one holds the marker (its
// size rewritten), long names (GNU 'L' entries), links and directories pass as they are, and the
// stream may arrive in chunks of any size.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { after, describe, it } from 'node:test';
import { createSecretRegistry, REDACTION_MARKER } from '../log/redactor.ts';
import { redactTar } from './files-tar.ts';

const SECRET = 'tar-Secret-a1b2c3d4e5f6';
const dir = mkdtempSync(join(tmpdir(), 'paddock-tar-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function sourceTree(): string {
  const src = join(dir, 'src');
  const long = 'l'.repeat(120);
  mkdirSync(join(src, 'sub', long), { recursive: true });
  writeFileSync(join(src, 'plain.txt'), 'nothing to hide\n');
  writeFileSync(join(src, 'secret.txt'), `a=${SECRET}\nb=${SECRET}${SECRET}\n`);
  writeFileSync(join(src, 'sub', long, 'deep.bin'), Buffer.alloc(70_000, 7));
  writeFileSync(join(src, 'empty'), '');
  symlinkSync('plain.txt', join(src, 'link'));
  return src;
}

async function chunked(bytes: Buffer, size: number): Promise<Buffer> {
  const registry = createSecretRegistry();
  registry.register(SECRET);
  const pieces: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.subarray(i, i + size));
  return await buffer(Readable.from(pieces).pipe(redactTar(registry)));
}

describe('redactTar', () => {
  it('keeps a valid archive, redacts the secret, keeps everything else', async () => {
    const src = sourceTree();
    const tar = execFileSync('tar', ['--format=gnu', '-C', src, '-cf', '-', '.']);
    for (const size of [1, 511, 4096, tar.length]) {
      const out = await chunked(tar, size);
      const target = join(dir, `out-${size}`);
      mkdirSync(target);
      execFileSync('tar', ['-xf', '-', '-C', target], { input: out });
      assert.equal(readFileSync(join(target, 'plain.txt'), 'utf8'), 'nothing to hide\n');
      assert.equal(
        readFileSync(join(target, 'secret.txt'), 'utf8'),
        `a=${REDACTION_MARKER}\nb=${REDACTION_MARKER}${REDACTION_MARKER}\n`,
      );
      assert.deepEqual(
        readFileSync(join(target, 'sub', 'l'.repeat(120), 'deep.bin')),
        Buffer.alloc(70_000, 7),
      );
      assert.equal(readFileSync(join(target, 'empty'), 'utf8'), '');
      assert.equal(readlinkSync(join(target, 'link')), 'plain.txt');
      assert.ok(!out.includes(Buffer.from(SECRET)));
    }
  });
});
