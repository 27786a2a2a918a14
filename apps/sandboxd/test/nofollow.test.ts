/**
 * runtime/nofollow.ts on a tree laid out the way a sandbox root can leave its layer: links (to a directory
 * outside, dangling, relative), a file, a deep nest. Nothing outside the tree changes; what the helpers act on
 * is always inside it. The attacks through a running sandbox are security.planted-links.test.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  chownTree,
  closeFd,
  ensureDirAt,
  MAX_DEPTH,
  openDirAt,
  openOwnDir,
} from '../src/runtime/nofollow.ts';

/** Root gives the tree other owners; any other user can only give it its own (then nothing changes). */
const TO =
  process.getuid?.() === 0
    ? { uid: 4242, gid: 4243 }
    : { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };

describe('no-follow directory steps', () => {
  let top = '';
  let tree = '';
  let outside = '';
  before(() => {
    top = mkdtempSync(path.join(os.tmpdir(), 'paddock-nofollow-'));
    tree = path.join(top, 'tree');
    outside = path.join(top, 'outside');
    mkdirSync(path.join(outside, 'dir'), { recursive: true });
    writeFileSync(path.join(outside, 'file'), 'x');
    mkdirSync(path.join(tree, 'real', 'sub'), { recursive: true });
    writeFileSync(path.join(tree, 'real', 'sub', 'f'), 'x');
    symlinkSync(path.join(outside, 'dir'), path.join(tree, 'to-dir'));
    symlinkSync('../outside/dir', path.join(tree, 'relative'));
    symlinkSync(path.join(outside, 'missing', 'deeper'), path.join(tree, 'dangling'));
    symlinkSync(path.join(outside, 'file'), path.join(tree, 'to-file'));
    writeFileSync(path.join(tree, 'plain-file'), 'x');
  });
  after(() => {
    // GNU rm walks by directory fd: the deep nest below is longer than PATH_MAX.
    execFileSync('rm', ['-rf', '--', top]);
  });

  it('makes a missing directory and opens an existing one; leaves links and files as they are', () => {
    const fd = openOwnDir(tree);
    try {
      const made = ensureDirAt(fd, 'new', 0o755);
      assert.ok(made !== null && lstatSync(path.join(tree, 'new')).isDirectory());
      closeFd(made);
      const real = openDirAt(fd, 'real');
      assert.ok(real !== null);
      closeFd(openDirAt(real, 'sub'));
      closeFd(real);
      for (const name of ['to-dir', 'relative', 'dangling', 'to-file', 'plain-file']) {
        assert.equal(ensureDirAt(fd, name, 0o755), null, name);
        assert.equal(openDirAt(fd, name), null, name);
      }
      assert.equal(openDirAt(fd, 'absent'), null);
      assert.throws(() => ensureDirAt(fd, '..', 0o755), /not a single path component/);
      assert.throws(() => openDirAt(fd, 'real/sub'), /not a single path component/);
    } finally {
      closeSync(fd);
    }
    assert.deepEqual(readdirSync(path.join(outside, 'dir')), [], 'nothing made through a link');
    assert.equal(existsSync(path.join(outside, 'missing')), false, 'nothing made through a dangling link');
    assert.throws(() => openOwnDir(path.join(tree, 'to-dir')), /ELOOP|ENOTDIR/);
  });

  it('changes the owners of the tree only, links themselves included, never their targets', async () => {
    const before = {
      dir: lstatSync(path.join(outside, 'dir')).uid,
      file: lstatSync(path.join(outside, 'file')).uid,
    };
    await chownTree(tree, () => TO);
    for (const p of [
      '',
      'real',
      'real/sub',
      'real/sub/f',
      'to-dir',
      'relative',
      'dangling',
      'to-file',
      'plain-file',
    ]) {
      const st = lstatSync(path.join(tree, p));
      assert.deepEqual([st.uid, st.gid], [TO.uid, TO.gid], p || '.');
    }
    assert.equal(lstatSync(path.join(outside, 'dir')).uid, before.dir);
    assert.equal(lstatSync(path.join(outside, 'file')).uid, before.file);
  });

  it(`refuses a tree deeper than ${MAX_DEPTH} directories`, async () => {
    const deep = path.join(top, 'deep');
    mkdirSync(deep);
    let fd = openOwnDir(deep);
    for (let i = 0; i <= MAX_DEPTH; i++) {
      const next = ensureDirAt(fd, 'd', 0o755)!;
      closeSync(fd);
      fd = next;
    }
    closeSync(fd);
    await assert.rejects(
      chownTree(deep, (uid, gid) => ({ uid, gid })),
      new RegExp(`deeper than ${MAX_DEPTH} directories`),
    );
  });
});
