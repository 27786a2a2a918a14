// Issue 41, deliverable 2: the sandbox's files through the public API, against the real sandboxd
// with the scripted runtime (the prompt is the turn's shell script). A turn writes a small tree
// (a text file, a file holding an environment secret, a big file, a binary file, symlinks out of
// the home and into .paddock); the files API lists, reads and archives it, confined and redacted.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { REDACTION_MARKER } from '../src/conversations/log/redactor.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

const SECRET = 'files-Secret-5e4d3c2b1a09';
const TREE = [
  'mkdir -p proj/src proj/empty',
  "printf 'hello\\n' > proj/src/a.txt",
  'printf "token=%s\\n" "$FILES_SECRET" > proj/secret.txt',
  'ln -s /etc proj/etc-link',
  'ln -s ../.paddock/env proj/env-link',
  'ln -s src proj/src-link',
  "head -c 2000000 /dev/zero | tr '\\0' 'a' > proj/big.txt",
  "printf '\\000\\001\\002binary' > proj/bin.dat",
  'echo made',
].join(' && ');

let h: ConversationHarness;
let user: TestUser;
let other: TestUser;
let conversationId: string;
before(async () => {
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: 100 } } });
  user = await h.user();
  other = await h.user();
  const environment = await h.environment(user);
  const put = await h.api(user, 'POST', `/api/environments/${environment}/secrets`, {
    key: 'FILES_SECRET',
    value: SECRET,
  });
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const agent = await h.agent(user, { environment_id: environment });
  const conv = await h.start(user, { agent_id: agent, prompt: TREE });
  conversationId = conv.id;
  await h.waitForTurn(user, conv.id, 1, 60_000);
  assert.equal(await h.stdout(conv.id), 'made\n');
});
after(async () => {
  await h?.close();
});

const files = (path: string, who: TestUser = user) =>
  h.api(who, 'GET', `/api/conversations/${conversationId}/files?path=${encodeURIComponent(path)}`);

async function content(query: string, who: TestUser = user) {
  const res = await fetch(`${h.url}/api/conversations/${conversationId}/files/content?${query}`, {
    headers: who.auth,
  });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

describe('GET /api/conversations/:id/files', () => {
  it('lists the home without .paddock, and a directory with types, sizes and times', async () => {
    const home = await files('');
    assert.equal(home.status, 200, JSON.stringify(home.body));
    const names = home.body.entries.map((e: { name: string }) => e.name);
    assert.ok(names.includes('proj'), names.join(','));
    assert.ok(!names.includes('.paddock'), names.join(','));

    const proj = await files('proj');
    assert.equal(proj.status, 200);
    const byName = new Map(proj.body.entries.map((e: { name: string }) => [e.name, e]));
    assert.deepEqual(
      proj.body.entries.map((e: { name: string }) => e.name),
      ['empty', 'etc-link', 'src', 'src-link', 'big.txt', 'bin.dat', 'env-link', 'secret.txt'],
      'directories (and links to them) first, then by name',
    );
    assert.partialDeepStrictEqual(byName.get('big.txt'), {
      path: 'proj/big.txt',
      type: 'file',
      size: 2_000_000,
    });
    assert.partialDeepStrictEqual(byName.get('src-link'), { type: 'symlink', target_type: 'dir' });
    assert.partialDeepStrictEqual(byName.get('src'), { type: 'dir', path: 'proj/src' });
    const mtime = Date.parse((byName.get('big.txt') as { mtime: string }).mtime);
    assert.ok(Math.abs(Date.now() - mtime) < 10 * 60_000, `mtime ${mtime}`);

    const through = await files('proj/src-link');
    assert.equal(through.status, 200);
    assert.deepEqual(
      through.body.entries.map((e: { path: string }) => e.path),
      ['proj/src-link/a.txt'],
    );
  });

  it('refuses traversal, absolute paths, .paddock and a symlink out of the home', async () => {
    for (const path of ['proj/../.paddock', '../etc', '/etc', '/home/sandbox/proj']) {
      const res = await files(path);
      assert.equal(res.status, 422, `${path}: ${JSON.stringify(res.body)}`);
      assert.ok(res.body.errors.path, path);
    }
    for (const path of ['.paddock', './.paddock', 'proj/etc-link']) {
      const res = await files(path);
      assert.equal(res.status, 403, `${path}: ${JSON.stringify(res.body)}`);
    }
    assert.equal((await files('proj/nope')).status, 404);
    assert.equal((await files('proj/big.txt')).status, 422);
  });

  it('is 404 for another tenant and 403 for the sandbox key', async () => {
    const res = await files('', other);
    assert.equal(res.status, 404);
    assert.equal(res.body.error, 'not_found');
    const key = await h.deps.apiKeys.mintConversationKey(user.id, conversationId);
    const keyed = await h.api(null, 'GET', `/api/conversations/${conversationId}/files`, undefined, {
      authorization: `Bearer ${key.key}`,
    });
    assert.equal(keyed.status, 403);
    const keyedContent = await h.api(
      null,
      'GET',
      `/api/conversations/${conversationId}/files/content?path=proj/src/a.txt`,
      undefined,
      { authorization: `Bearer ${key.key}` },
    );
    assert.equal(keyedContent.status, 403);
  });
});

describe('GET /api/conversations/:id/files/content', () => {
  it('serves a text file inline as text/plain', async () => {
    const res = await content('path=proj/src/a.txt');
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), 'hello\n');
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; charset=utf-8/);
    assert.equal(res.headers.get('content-disposition'), null);
    assert.match(res.headers.get('content-security-policy') ?? '', /sandbox/);
  });

  it('a secret written into a file is redacted', async () => {
    const res = await content('path=proj/secret.txt');
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), `token=${REDACTION_MARKER}\n`);
  });

  it('the env file is refused, whichever way it is named', async () => {
    for (const query of ['path=.paddock/env', 'path=proj/env-link', 'path=.%2F.paddock%2Fenv']) {
      const res = await content(query);
      assert.equal(res.status, 403, query);
      assert.ok(!res.body.toString().includes('PADDOCK_TOKEN'), query);
    }
    assert.equal((await content('path=proj%2F..%2F.paddock%2Fenv')).status, 422);
    assert.equal((await content('path=proj/etc-link/passwd')).status, 403);
    assert.equal((await content('path=proj/src')).status, 422);
  });

  it('a file over 1 MiB is 413 unless downloaded; a binary file is an attachment', async () => {
    const big = await content('path=proj/big.txt');
    assert.equal(big.status, 413);
    assert.equal(JSON.parse(big.body.toString()).error, 'file_too_large');
    const downloaded = await content('path=proj/big.txt&download=1');
    assert.equal(downloaded.status, 200);
    assert.equal(downloaded.body.length, 2_000_000);
    assert.ok(downloaded.body.every((b) => b === 0x61));
    assert.match(downloaded.headers.get('content-disposition') ?? '', /^attachment; filename="big.txt"/);

    const binary = await content('path=proj/bin.dat');
    assert.equal(binary.status, 200);
    assert.equal(binary.headers.get('content-type'), 'application/octet-stream');
    assert.match(binary.headers.get('content-disposition') ?? '', /^attachment; filename="bin.dat"/);
    assert.deepEqual(binary.body, Buffer.from('\x00\x01\x02binary', 'latin1'));
  });

  it('a directory as a tar.gz: made in the sandbox, redacted, without .paddock', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paddock-files-'));
    try {
      const proj = await content('path=proj&archive=tar.gz');
      assert.equal(proj.status, 200);
      assert.equal(proj.headers.get('content-type'), 'application/gzip');
      writeFileSync(join(dir, 'proj.tar.gz'), proj.body);
      const listed = execFileSync('tar', ['-tzf', join(dir, 'proj.tar.gz')], { encoding: 'utf8' });
      for (const name of ['./src/a.txt', './secret.txt', './big.txt', './etc-link', './env-link'])
        assert.ok(listed.split('\n').includes(name), `${name} in ${listed}`);
      execFileSync('tar', ['-xzf', join(dir, 'proj.tar.gz'), '-C', dir]);
      assert.equal(readFileSync(join(dir, 'secret.txt'), 'utf8'), `token=${REDACTION_MARKER}\n`);
      assert.equal(readFileSync(join(dir, 'src/a.txt'), 'utf8'), 'hello\n');
      assert.equal(readFileSync(join(dir, 'big.txt')).length, 2_000_000);

      const home = await content('archive=tar.gz');
      assert.equal(home.status, 200);
      writeFileSync(join(dir, 'home.tar.gz'), home.body);
      const homeList = execFileSync('tar', ['-tzf', join(dir, 'home.tar.gz')], { encoding: 'utf8' });
      assert.ok(homeList.includes('./proj/src/a.txt'), homeList);
      assert.ok(!homeList.includes('.paddock'), homeList);
      assert.ok(!home.body.includes(Buffer.from(SECRET)));

      assert.equal((await content('path=proj/src/a.txt&archive=tar.gz')).status, 422);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('without a live sandbox', () => {
  it('answers 409 sandbox_not_running saying how to wake it', async () => {
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitForTurn(user, conv.id, 1, 60_000);
    await h.reclaim(user, conv.id);
    const res = await h.api(user, 'GET', `/api/conversations/${conv.id}/files`);
    assert.equal(res.status, 409);
    assert.equal(res.body.error, 'sandbox_not_running');
    assert.match(res.body.message, /send a prompt/);
    assert.match(res.body.message, new RegExp(`/api/conversations/${conv.id}/prompts`));
    const read = await h.api(user, 'GET', `/api/conversations/${conv.id}/files/content?path=x`);
    assert.equal(read.status, 409);
  });
});
