// The changes script on a local repository (PADDOCK_CHANGES_HOME stands for /home/sandbox): the
// parse of its -z output (renames, a path with a space, deletes, binary, committed or not, a
// repository without commits) and that it never writes the user's index or object store.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseScriptOutput, type ScriptMode, scriptArgv, splitPatch } from './changes-script.ts';

const home = mkdtempSync(join(tmpdir(), 'paddock-changes-'));
after(() => rmSync(home, { recursive: true, force: true }));
const ident = {
  GIT_AUTHOR_NAME: 'a',
  GIT_AUTHOR_EMAIL: 'a@a',
  GIT_COMMITTER_NAME: 'a',
  GIT_COMMITTER_EMAIL: 'a@a',
};
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...ident } });
const run = (cloned: { dir: string; base: string }[], mode: ScriptMode, limit = 0) => {
  const [cmd = 'sh', ...args] = scriptArgv(cloned, mode);
  return parseScriptOutput(
    execFileSync(cmd, args, { env: { ...process.env, PADDOCK_CHANGES_HOME: home } }),
    limit,
  );
};

test('lists every kind of change, the way git sees it, without touching the repository', () => {
  const app = join(home, 'app');
  mkdirSync(app);
  git(app, 'init', '-q');
  writeFileSync(join(app, 'a.txt'), 'one\ntwo\n');
  writeFileSync(join(app, 'b.txt'), 'bee\n'.repeat(20));
  writeFileSync(join(app, 'del.txt'), 'x\n');
  git(app, 'add', '-A');
  git(app, 'commit', '-qm', 'init');
  const base = git(app, 'rev-parse', 'HEAD').trim();
  writeFileSync(join(app, 'a.txt'), 'one\nTWO\nthree\n');
  renameSync(join(app, 'b.txt'), join(app, 'c d.txt'));
  rmSync(join(app, 'del.txt'));
  writeFileSync(join(app, 'bin.dat'), Buffer.from([0, 1, 2, 3]));
  writeFileSync(join(app, 'committed.txt'), 'c\n');
  git(app, 'add', 'committed.txt');
  git(app, 'commit', '-qm', 'c');
  const mine = join(home, 'mine');
  mkdirSync(mine);
  git(mine, 'init', '-q');
  writeFileSync(join(mine, 'n.txt'), 'new\n');
  mkdirSync(join(home, '.paddock'), { recursive: true });
  writeFileSync(join(home, '.paddock', 'env'), "export PADDOCK_TOKEN='pdk_test_key'\n");
  const status = git(app, 'status', '--porcelain');
  const objects = readdirSync(join(app, '.git', 'objects')).sort();

  const { repositories, sandboxKey } = run([{ dir: 'app', base }], { mode: 'list' });
  assert.equal(sandboxKey, 'pdk_test_key');
  assert.deepEqual(
    repositories.map((r) => [r.dir, r.origin]),
    [
      ['app', 'cloned'],
      ['mine', 'created'],
    ],
  );
  assert.deepEqual(
    repositories[0]?.files.map((f) => [
      f.path,
      f.old_path,
      f.status,
      f.additions,
      f.deletions,
      f.binary,
      f.committed,
    ]),
    [
      ['a.txt', null, 'modified', 2, 1, false, false],
      ['bin.dat', null, 'added', 0, 0, true, false],
      ['c d.txt', 'b.txt', 'renamed', 0, 0, false, false],
      ['committed.txt', null, 'added', 1, 0, false, true],
      ['del.txt', null, 'deleted', 0, 1, false, false],
    ],
  );
  assert.equal(repositories[1]?.base, '4b825dc642cb6eb9a060e54bf8d69288fbee4904');
  assert.deepEqual(
    repositories[1]?.files.map((f) => [f.path, f.committed]),
    [['n.txt', false]],
  );
  // Nothing of the user's repository changed: status, and not one object written into it.
  assert.equal(git(app, 'status', '--porcelain'), status);
  assert.deepEqual(readdirSync(join(app, '.git', 'objects')).sort(), objects);

  const file = run(
    [{ dir: 'app', base }],
    { mode: 'file', dir: 'app', path: 'c d.txt', oldPath: 'b.txt' },
    1000,
  );
  assert.equal(file.repositories.length, 1);
  assert.equal(
    file.repositories[0]?.patches?.map(String).join(''),
    'diff --git a/b.txt b/c d.txt\nsimilarity index 100%\nrename from b.txt\nrename to c d.txt\n',
  );

  // A turn: from the trees at its start.
  const snap = run([{ dir: 'app', base }], { mode: 'snap' });
  const starts = Object.fromEntries(snap.repositories.map((r) => [r.dir, r.tree]));
  writeFileSync(join(app, 'a.txt'), 'after\n');
  const turn = run([{ dir: 'app', base }], { mode: 'turn', starts }, 100_000);
  assert.deepEqual(
    turn.repositories.map((r) => r.files.map((f) => f.path)),
    [['a.txt'], []],
  );
  assert.match(
    String(turn.repositories[0]?.patches?.[0]),
    /^diff --git a\/a\.txt b\/a\.txt\n[\s\S]*\+after\n$/,
  );
});

test('splitPatch cuts at each file header only', () => {
  const patch = Buffer.from('diff --git a/x b/x\n@@ -1 +1 @@\n-diff --git no\n+x\ndiff --git a/y b/y\n+y\n');
  assert.deepEqual(splitPatch(patch).map(String), [
    'diff --git a/x b/x\n@@ -1 +1 @@\n-diff --git no\n+x\n',
    'diff --git a/y b/y\n+y\n',
  ]);
});
