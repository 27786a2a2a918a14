// Backups end to end (issue 40): state built on a real server (an account, an environment with a
// secret, a conversation whose turn ran in a real sandbox with the scripted runtime), dumped by
// the real deploy/backup/backup.sh with a real pg_dump 17 (scripts/pg-client.sh installs it,
// idempotently), pruned by retention on file mtimes, then restored by the real
// scripts/restore-drill.sh into a fresh embedded PostgreSQL and checked through the public API of
// the real server it starts. The same dump with a wrong master key fails the drill, naming why.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const BACKUP = join(ROOT, 'deploy/backup/backup.sh');
const DRILL = join(ROOT, 'scripts/restore-drill.sh');
const PG_CLIENT = join(ROOT, 'scripts/pg-client.sh');
const SECRET = `drill-secret-${randomBytes(6).toString('hex')}`;
const MARK = `drill-output-${randomBytes(4).toString('hex')}`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run> {
  return new Promise((resolveRun) => {
    execFile(file, args, { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolveRun({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

let h: ConversationHarness;
let user: TestUser;
let pgBin: string;
let dir: string;
let masterKey: string;
let conversationId: string;
const baseEnv = () => ({ PATH: `${pgBin}:${process.env['PATH'] ?? ''}`, HOME: process.env['HOME'] ?? '/' });

before(async () => {
  // The PostgreSQL 17 client tools: installed once into the cache (minutes the first time), then
  // found there. A failure here fails the file: it must not skip.
  const client = await run(PG_CLIENT, [], { ...process.env }, 20 * 60_000);
  assert.equal(client.code, 0, `scripts/pg-client.sh failed: ${client.stderr}`);
  pgBin = client.stdout.trim().split('\n').at(-1) ?? '';
  assert.match((await run(join(pgBin, 'pg_dump'), ['--version'], {}, 30_000)).stdout, /\(PostgreSQL\) 17\./);

  dir = mkdtempSync(join(tmpdir(), 'backup-drill-'));
  h = await startConversationHarness();
  masterKey = h.config.masterSecretsKey?.toString('base64url') ?? '';
  assert.equal(masterKey.length, 43);
  user = await h.user();
  const environment = await h.environment(user);
  const put = await h.api(user, 'POST', `/api/environments/${environment}/secrets`, {
    key: 'TOKEN',
    value: SECRET,
  });
  assert.equal(put.status, 201);
  const agent = await h.agent(user, { environment_id: environment });
  const conv = await h.start(user, { agent_id: agent, prompt: `echo ${MARK}; echo "token=$TOKEN"` });
  conversationId = conv.id;
  const turn = await h.waitForTurn(user, conv.id, 1, 120_000);
  assert.equal(turn.status, 'succeeded', turn.error ?? '');
  // The secret reached the sandbox decrypted (and was redacted on the way back).
  assert.equal(await h.stdout(conv.id), `${MARK}\ntoken=[REDACTED]\n`);
});
after(async () => {
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const dumps = (d: string) =>
  readdirSync(d)
    .filter((n) => n.startsWith('paddock-'))
    .sort();

describe('backup.sh', () => {
  let backups: string;
  before(() => {
    backups = join(dir, 'backups');
  });

  it('dumps with pg_dump -Fc to paddock-<UTC stamp>.dump, one log line, no password', async () => {
    const url = new URL(h.database.url);
    assert.ok(url.password, 'the test database URL carries a password');
    const env = {
      ...baseEnv(),
      DATABASE_URL: h.database.url,
      BACKUP_DIR: backups,
      BACKUP_RETENTION_DAYS: '',
    };
    const res = await run(BACKUP, ['--once'], env, 300_000);
    assert.equal(res.code, 0, res.stderr);
    const files = dumps(backups);
    assert.equal(files.length, 1);
    assert.match(files[0] ?? '', /^paddock-\d{8}T\d{6}Z\.dump$/);
    const path = join(backups, files[0] ?? '');
    assert.equal(readFileSync(path).subarray(0, 5).toString(), 'PGDMP', 'a pg_dump custom-format archive');
    assert.equal(statSync(path).mode & 0o077, 0, 'readable by its owner only');
    assert.deepEqual(
      readdirSync(backups).filter((n) => n.startsWith('.')),
      [],
      'no temporary file left',
    );
    const lines = res.stdout.trim().split('\n');
    assert.equal(lines.length, 1, res.stdout);
    assert.match(
      lines[0] ?? '',
      /backup: wrote .*paddock-\d{8}T\d{6}Z\.dump \(\d+ bytes in \d+s\).*pruned 0 dump\(s\) older than 14 day\(s\)/,
    );
    assert.ok(
      !`${res.stdout}${res.stderr}`.includes(decodeURIComponent(url.password)),
      'the password is not logged',
    );
  });

  it('prunes dumps older than BACKUP_RETENTION_DAYS (by mtime) after the next dump, keeping the new one', async () => {
    const [first] = dumps(backups);
    assert.ok(first);
    // The first dump is now 2 days old; a stranger's file in the directory is left alone.
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    utimesSync(join(backups, first), twoDaysAgo, twoDaysAgo);
    writeFileSync(join(backups, 'notes.txt'), 'not a dump');
    utimesSync(join(backups, 'notes.txt'), twoDaysAgo, twoDaysAgo);
    await new Promise((r) => setTimeout(r, 1100)); // the next stamp differs by a second at least
    const env = {
      ...baseEnv(),
      DATABASE_URL: h.database.url,
      BACKUP_DIR: backups,
      BACKUP_RETENTION_DAYS: '1',
    };
    const res = await run(BACKUP, ['--once'], env, 300_000);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /pruned 1 dump\(s\) older than 1 day\(s\)/);
    const files = dumps(backups);
    assert.equal(files.length, 1);
    assert.notEqual(files[0], first);
    assert.ok(readdirSync(backups).includes('notes.txt'));
  });

  it('refuses malformed settings naming the variable, and a failed dump leaves nothing', async () => {
    const env = { ...baseEnv(), DATABASE_URL: h.database.url, BACKUP_DIR: join(dir, 'refused') };
    for (const [name, value] of [
      ['BACKUP_RETENTION_DAYS', 'two'],
      ['BACKUP_RETENTION_DAYS', '-1'],
      ['BACKUP_INTERVAL_SECONDS', '0'],
      ['BACKUP_INTERVAL_SECONDS', '-5'],
      ['BACKUP_INTERVAL_SECONDS', '1.5'],
      ['DATABASE_URL', 'mysql://x@y/z'],
      ['DATABASE_URL', ''],
    ] as const) {
      const res = await run(BACKUP, ['--once'], { ...env, [name]: value }, 30_000);
      assert.notEqual(res.code, 0, `${name}=${value} accepted`);
      assert.match(res.stderr, new RegExp(name), `${name}=${value}: ${res.stderr}`);
    }
    // The database refuses the password: a failed dump, logged without the password, no file.
    const url = new URL(h.database.url);
    url.password = 'wrong-Pa55word';
    const failed = await run(BACKUP, ['--once'], { ...env, DATABASE_URL: url.toString() }, 60_000);
    assert.notEqual(failed.code, 0);
    assert.match(failed.stderr, /FAILED dump of postgres(ql)?:\/\/[^:]+@/);
    assert.ok(!`${failed.stdout}${failed.stderr}`.includes('wrong-Pa55word'));
    assert.deepEqual(readdirSync(join(dir, 'refused')), []);
  });
  it('as a service: dumps at once and then every interval, BACKUP_RETENTION_DAYS=0 keeps the newest only, SIGTERM stops it', async () => {
    const looped = join(dir, 'looped');
    const child = spawn(BACKUP, [], {
      env: {
        ...baseEnv(),
        DATABASE_URL: h.database.url,
        BACKUP_DIR: looped,
        BACKUP_INTERVAL_SECONDS: '1',
        BACKUP_RETENTION_DAYS: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const deadline = Date.now() + 60_000;
      while ((out.match(/backup: wrote /g) ?? []).length < 3 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      assert.ok((out.match(/backup: wrote /g) ?? []).length >= 3, out);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, out);
    } finally {
      child.kill('SIGKILL');
    }
    assert.match(out, /backup: every 1s into .*, keeping 0 day\(s\)/);
    assert.match(out, /pruned [1-9]\d* dump\(s\) older than 0 day\(s\)/);
    assert.match(out, /backup: stopping/);
    assert.equal(dumps(looped).length, 1, readdirSync(looped).join(' '));
  });
});

describe('restore drill', () => {
  const drillEnv = (key: string) => ({
    ...baseEnv(),
    MASTER_SECRETS_KEY: key,
    SECRET_KEY_BASE: randomBytes(32).toString('hex'),
    DRILL_API_KEY: user.apiKey,
  });
  const dumpFile = () => join(dir, 'backups', dumps(join(dir, 'backups'))[0] ?? 'missing');

  it('restores the dump into a fresh database; the restored server serves the conversation and its log, and decrypts the secrets', async () => {
    const res = await run(DRILL, [dumpFile()], drillEnv(masterKey), 600_000);
    assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
    assert.match(res.stdout, /^ok {3}restored: /m);
    assert.match(res.stdout, /^ok {3}conversations listed: 1 conversation\(s\)/m);
    assert.match(
      res.stdout,
      new RegExp(
        `^ok {3}conversation log served: conversation ${conversationId}: \\d+ log event\\(s\\)`,
        'm',
      ),
    );
    assert.match(
      res.stdout,
      /^ok {3}secrets decrypt: verified 1 tenant key\(s\) and 1 secret\(s\); 0 tenant/m,
    );
    assert.match(res.stdout, /^ok {3}server uses the key: /m);
    assert.match(res.stdout, /restore drill: PASSED \(\d+ checks\)\n$/);
    for (const secret of [SECRET, masterKey, user.apiKey])
      assert.ok(!`${res.stdout}${res.stderr}`.includes(secret), 'nothing secret in the output');
  });

  it('fails clearly with a wrong master key', async () => {
    const wrong = randomBytes(32).toString('base64url');
    const res = await run(DRILL, [dumpFile()], drillEnv(wrong), 600_000);
    assert.equal(res.code, 1, `${res.stdout}\n${res.stderr}`);
    // The data is all there; only the secrets are unreadable.
    assert.match(res.stdout, /^ok {3}conversation log served: /m);
    assert.match(
      res.stdout,
      /^FAIL secrets decrypt: verified 0 tenant key\(s\) and 0 secret\(s\); 1 tenant key\(s\) and 1 secret\(s\) unreadable/m,
    );
    assert.match(res.stdout, /^FAIL server uses the key: .*MASTER_SECRETS_KEY does not match/m);
    assert.match(
      res.stdout,
      /restore drill: FAILED \(2 of \d+ checks failed: secrets decrypt, server uses the key\)\n$/,
    );
    assert.ok(!`${res.stdout}${res.stderr}`.includes(wrong));
  });

  it('refuses bad usage with exit 2', async () => {
    const noKey = await run(DRILL, [dumpFile()], { ...drillEnv(''), MASTER_SECRETS_KEY: '' }, 60_000);
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /MASTER_SECRETS_KEY: required/);
    const noFile = await run(DRILL, [join(dir, 'nope.dump')], drillEnv(masterKey), 60_000);
    assert.equal(noFile.code, 2);
    assert.match(noFile.stderr, /no such file/);
  });
});
