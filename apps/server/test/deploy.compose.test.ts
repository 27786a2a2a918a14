// deploy/compose.yaml run for real with podman-compose (Debian 12's 1.0.3), as an operator would:
// the file and deploy/backup/ copied into a project directory of this test's own, beside a `.env`
// holding only the secrets deploy/.env.example says are required, plus what points the stack at
// this machine: the images just built (SERVICE_IMAGE_TAG; POSTGRES_IMAGE=localhost/paddock-postgres:17,
// the stand-in that also carries pg_dump 17), a free host port (PADDOCK_PORT, with PUBLIC_URL to
// match), sandboxd without the 1.5 GB runtime layer (SANDBOXD_RUNTIME_LAYER=off) and a dump every
// few seconds (BACKUP_INTERVAL_SECONDS).
//
// 1. scripts/build-images.sh --make-base --postgres (helpers/podman.ts; cached; older sha-* tags go,
//    shown on a stale tag);
// 2. `podman-compose up -d`: the four services run; /health/ready answers 200 on the published port,
//    which is the only one published; a user registers through the API of the image's own `serve`;
// 3. the backup service writes a dump (pg_dump -Fc) that holds that user, and logs no password;
//    `podman-compose run --rm -T backup --once` makes one more (the on-demand dump of the docs);
// 4. the server is recreated with a second compose file (compose.scripted.yaml) that only swaps its
//    command for the scripted runtime's boot (test/fixtures/serve-scripted.ts, mounted read-only:
//    the real agent CLIs need the runtime layer and an inference provider) and a conversation runs,
//    its turn in a sandbox of the containerised sandboxd;
// 5. `podman-compose down -v`, then what 1.0.3 leaves (the project's network) is removed: no
//    container, volume or network of the project remains.
//
// Needs podman, podman-compose and, for the services' names on the project network, DNS on podman
// networks (netavark's aardvark-dns, or the CNI dnsname plugin): scripts/ci-system-deps.sh installs
// them. A missing tool fails the test; only an ordinary user outside CI gets it skipped, with the
// reason (rootful podman: helpers/podman.ts podmanUnavailable).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  buildImages,
  containerLogs,
  freePort,
  PODMAN_ENV,
  podman,
  podmanUnavailable,
  pruneOlderShaTags,
  ROOT,
  registerAndConverse,
  run,
  until,
} from './helpers/podman.ts';

const missing = podmanUnavailable('deploy.compose.test.ts', [
  { command: 'podman-compose', versionArg: 'version' },
]);
const SERVICES = ['backup', 'postgres', 'sandboxd', 'server'];

/** The variables deploy/.env.example leaves to fill in (`NAME=` lines, not commented out). */
function requiredVariables(): string[] {
  return readFileSync(join(ROOT, 'deploy/.env.example'), 'utf8')
    .split('\n')
    .filter((line) => /^[A-Z_]+=\s*$/.test(line))
    .map((line) => line.slice(0, line.indexOf('=')));
}

describe('deploy/compose.yaml with podman-compose', { skip: missing || false }, () => {
  const project = `paddockct${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'paddock-test-compose-'));
  const label = `label=io.podman.compose.project=${project}`;
  const container = (service: string) => `${project}_${service}_1`;

  const compose = async (files: string[], args: string[], timeoutMs = 300_000) => {
    const fileArgs = files.flatMap((f) => ['-f', f]);
    return run('podman-compose', ['-p', project, ...fileArgs, ...args], {
      cwd: dir,
      env: PODMAN_ENV,
      timeout: timeoutMs,
      maxBuffer: 64 * 1024 * 1024,
    }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`podman-compose ${args.join(' ')}: ${err.message}\n${(err.stderr ?? '').slice(-4000)}`);
    });
  };
  const logsOf = (service: string) => containerLogs(container(service));
  const imageExists = (ref: string) =>
    podman(['image', 'exists', ref]).then(
      () => true,
      () => false,
    );
  const leftovers = async () => ({
    containers: (await podman(['ps', '-a', '-q', '--filter', label])).trim(),
    volumes: (await podman(['volume', 'ls', '-q', '--filter', label])).trim(),
    networks: (await podman(['network', 'ls', '-q', '--filter', `name=^${project}_`])).trim(),
  });

  after(async () => {
    // Whatever a failed step left: containers, volumes, the network; then the project directory.
    const ids = (await podman(['ps', '-a', '-q', '--filter', label]).catch(() => ''))
      .split('\n')
      .filter(Boolean);
    if (ids.length > 0) await podman(['rm', '-f', '-t', '5', ...ids]).catch(() => '');
    const volumes = (await podman(['volume', 'ls', '-q', '--filter', label]).catch(() => ''))
      .split('\n')
      .filter(Boolean);
    if (volumes.length > 0) await podman(['volume', 'rm', '-f', ...volumes]).catch(() => '');
    await podman(['network', 'rm', '-f', `${project}_default`]).catch(() => '');
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts PostgreSQL, sandboxd, the server and the backup job from a .env of the secrets alone', async () => {
    // 1. The images.
    const { images, tag } = await buildImages();
    // What buildImages did after the build (pruneOlderShaTags), shown in a repository of this
    // test's own (so that a deploy test running alongside prunes nothing of it): of two sha-* tags,
    // the one naming an older image (the base, built before the server) goes, the images stay.
    const baseImage = (
      await podman(['images', '--format', '{{.Repository}}:{{.Tag}}', 'localhost/paddock-base'])
    )
      .split('\n')
      .find(Boolean);
    assert.ok(baseImage, 'build-images.sh --make-base made localhost/paddock-base');
    const older = `localhost/paddock-prune-test:sha-${project}-old`;
    const current = `localhost/paddock-prune-test:sha-${project}-new`;
    await podman(['tag', baseImage, older]);
    await podman(['tag', images['paddock-server']!, current]);
    try {
      assert.deepEqual(await pruneOlderShaTags([current]), [older]);
      assert.equal(await imageExists(older), false, `${older} is removed`);
      assert.equal(await imageExists(current), true, 'the current tag stays');
      assert.equal(await imageExists(baseImage), true, 'the base stays');
    } finally {
      await podman(['rmi', '--ignore', older, current]).catch(() => '');
    }

    // The project directory: the compose file, the backup script it mounts, the .env.
    copyFileSync(join(ROOT, 'deploy/compose.yaml'), join(dir, 'compose.yaml'));
    mkdirSync(join(dir, 'backup'));
    copyFileSync(join(ROOT, 'deploy/backup/backup.sh'), join(dir, 'backup/backup.sh'));
    const required = requiredVariables();
    assert.deepEqual(
      [...required].sort(),
      ['MASTER_SECRETS_KEY', 'POSTGRES_PASSWORD', 'SANDBOX_TOKEN', 'SECRET_KEY_BASE'],
      'deploy/.env.example names the four secrets',
    );
    const secrets: Record<string, string> = {};
    for (const name of required) secrets[name] = randomBytes(32).toString('base64url');
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env: Record<string, string> = {
      ...secrets,
      SERVICE_IMAGE_TAG: tag,
      POSTGRES_IMAGE: images['paddock-postgres']!,
      PADDOCK_PORT: String(port),
      PUBLIC_URL: base,
      SANDBOXD_RUNTIME_LAYER: 'off',
      BACKUP_INTERVAL_SECONDS: '3',
    };
    writeFileSync(
      join(dir, '.env'),
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(''),
      { mode: 0o600 },
    );

    // 2. Up, as written.
    await compose(['compose.yaml'], ['up', '-d']);
    const states = JSON.parse(await podman(['ps', '-a', '--format', 'json', '--filter', label])) as {
      Labels: Record<string, string>;
      State: string;
      Image: string;
    }[];
    assert.deepEqual(states.map((c) => c.Labels['com.docker.compose.service']).sort(), SERVICES);
    const imageOf = (service: string) =>
      states.find((c) => c.Labels['com.docker.compose.service'] === service)?.Image;
    assert.equal(imageOf('server'), images['paddock-server']);
    assert.equal(imageOf('sandboxd'), images['paddock-sandboxd']);
    assert.equal(imageOf('backup'), images['paddock-postgres']);

    const ready = async () =>
      until('GET /health/ready answers 200', 240_000, async () => {
        const res = await fetch(`${base}/health/ready`, { signal: AbortSignal.timeout(3000) });
        return res.status === 200 ? true : undefined;
      }).catch(async (err: Error) => {
        throw new Error(
          `${err.message}\nserver log:\n${await logsOf('server')}\npostgres log:\n${await logsOf('postgres')}\nsandboxd log:\n${await logsOf('sandboxd')}`,
        );
      });
    await ready();
    const running = JSON.parse(await podman(['ps', '--format', 'json', '--filter', label])) as {
      Labels: Record<string, string>;
    }[];
    assert.deepEqual(
      running.map((c) => c.Labels['com.docker.compose.service']).sort(),
      SERVICES,
      'all four run',
    );
    // Only the public listener is published, on the loopback address.
    const published = (await podman(['port', container('server')])).trim().split('\n');
    assert.deepEqual(published, [`4000/tcp -> 127.0.0.1:${port}`]);

    const email = `compose-${randomBytes(4).toString('hex')}@example.com`;
    const registered = await fetch(`${base}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'a long compose passphrase' }),
    });
    assert.ok([200, 201].includes(registered.status), await registered.text());

    // 3. The backup job: a complete dump that already holds the user (pg_restore reads it back).
    const dump = await until('a dump holding the registered user', 120_000, async () => {
      const names = (await podman(['exec', container('backup'), 'ls', '/backups'])).split('\n');
      const newest = names
        .filter((n) => /^paddock-\d{8}T\d{6}Z\.dump$/.test(n))
        .sort()
        .pop();
      if (!newest) return undefined;
      const data = await podman([
        'exec',
        container('backup'),
        'pg_restore',
        '--data-only',
        '-f',
        '-',
        `/backups/${newest}`,
      ]);
      return data.includes(email) ? newest : undefined;
    }).catch(async (err: Error) => {
      throw new Error(`${err.message}\nbackup log:\n${await logsOf('backup')}`);
    });
    const backupLog = await logsOf('backup');
    assert.match(backupLog, new RegExp(`wrote /backups/${dump}`));
    assert.ok(!backupLog.includes(secrets['POSTGRES_PASSWORD']!), 'the backup log holds no password');
    // A dump on demand (before an upgrade, docs/operations.md): the service's entry point with --once.
    const once = await compose(['compose.yaml'], ['run', '--rm', '-T', 'backup', '--once']);
    assert.match(
      once.stdout,
      /backup: wrote \/backups\/paddock-\d{8}T\d{6}Z\.dump \(\d+ bytes/,
      once.stdout.slice(-2000),
    );

    // 4. A conversation: the server recreated with the scripted runtime (compose.scripted.yaml),
    //    the other services left running. podman-compose 1.0.3 cannot recreate one service (no
    //    change detection, --no-deps ignored): remove its container, then `up` that service.
    writeFileSync(
      join(dir, 'compose.scripted.yaml'),
      [
        'services:',
        '  server:',
        '    entrypoint: ["node", "apps/server/test/fixtures/serve-scripted.ts"]',
        '    command: ["60000"]',
        '    volumes:',
        `      - ${join(ROOT, 'apps/server/test/fixtures')}:/app/apps/server/test/fixtures:ro`,
        '',
      ].join('\n'),
    );
    await podman(['rm', '-f', '-t', '10', container('server')]);
    await compose(['compose.yaml', 'compose.scripted.yaml'], ['up', '-d', 'server']);
    await ready();
    await registerAndConverse({
      base,
      words: 'compose',
      logs: async () => `server log:\n${await logsOf('server')}\nsandboxd log:\n${await logsOf('sandboxd')}`,
    });

    // 5. Down with the volumes; 1.0.3 leaves the project's network, which goes next.
    await compose(['compose.yaml'], ['down', '-v']);
    const left = await leftovers();
    assert.equal(left.containers, '', 'no container of the project is left');
    assert.equal(left.volumes, '', 'no volume of the project is left');
    await podman(['network', 'rm', `${project}_default`]);
    assert.deepEqual(await leftovers(), { containers: '', volumes: '', networks: '' });
  });
});
