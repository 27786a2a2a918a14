// Changes (issue 41, deliverable 1) end to end through the public API: a real sandboxd, the
// scripted runtime (the prompt is the turn's shell script), and a fake git host over https that
// the sandbox reaches through its egress proxy (a service route). A turn edits the cloned
// repository and creates one of its own; /changes shows exactly that, redacted and bounded; each
// turn's own changes are recorded and outlive a reclaim; other tenants and the sandbox key are
// refused.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSandboxClient, type SandboxClient } from '@paddock/sandbox-client';
import { REDACTION_MARKER } from '../src/conversations/log/redactor.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';
import { type FakeGitHost, startFakeGitHost } from './helpers/git-server.ts';

// biome-ignore lint/suspicious/noExplicitAny: API responses are parsed JSON, asserted field by field
type Json = any;

const SECRET = 'sk-changes-secret-0123456789abcdef';
const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

let h: ConversationHarness;
let git: FakeGitHost;
let gitServer: net.Server;
let sandbox: SandboxClient;
let user: TestUser;
let other: TestUser;
let repoUrl: string;
let baseSha: string;
let conversationId: string;
let turn1: string;
let turn2: string;

/** Turn 1: edits, a rename, a delete, a binary, a large file, a secret, a commit, a repo of its own. */
const TURN_1 = [
  'set -e',
  'cd app',
  "printf 'line1\\nCHANGED\\n' > src/a.ts",
  'git mv old.txt renamed.txt',
  'rm gone.txt',
  "printf '\\000\\001\\002\\003' > bin.dat",
  'echo "token=$TOKEN" > secret.txt',
  "head -c 300000 /dev/zero | tr '\\000' 'a' | fold -w 100 > large.txt",
  'echo committed > committed.txt',
  'git add committed.txt',
  'git -c user.name=agent -c user.email=agent@example.test commit -q -m "add committed.txt" -- committed.txt',
  'cd ..',
  'mkdir mine && cd mine && git init -q && echo hi > hello.txt',
  'echo done',
].join('\n');
const TURN_2 = 'cd app && echo more >> README.md';

async function listen(): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

async function sandboxName(id: string): Promise<string> {
  const row = await h.deps.db
    .selectFrom('sandboxes')
    .select('name')
    .where('conversation_id', '=', id)
    .where('status', '=', 'ready')
    .executeTakeFirstOrThrow();
  return row.name;
}

async function sh(name: string, script: string): Promise<string> {
  const r = await sandbox.exec(name, { cmd: ['sh', '-c', script] });
  assert.equal(r.exitCode, 0, r.stderr.toString());
  return r.stdout.toString();
}

const CLI = join(import.meta.dirname, '..', '..', 'cli', 'bin', 'paddock.mjs');

/** The CLI as a child process against the harness's app. */
function paddock(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), 'paddock-cli-diff-'));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        PATH: process.env['PATH'],
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'config'),
        PADDOCK_URL: h.url,
        PADDOCK_API_KEY: user.apiKey,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += String(d);
    });
    child.stderr.on('data', (d) => {
      stderr += String(d);
    });
    child.on('error', reject);
    child.on('close', (code) => {
      rmSync(home, { recursive: true, force: true });
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

const byPath = (repo: Json) => Object.fromEntries(repo.files.map((f: Json) => [f.path, f]));

before(async () => {
  const listener = await listen();
  gitServer = listener.server;
  git = startFakeGitHost(listener.server);
  const created = git.addRepo('acme/app', [
    {
      files: {
        'README.md': '# app\n',
        'src/a.ts': 'line1\nline2\n',
        'old.txt': 'to be renamed\n',
        'gone.txt': 'to be deleted\n',
      },
    },
  ]);
  baseSha = created.shas[0] ?? '';
  repoUrl = `https://git.test:${listener.port}/acme/app.git`;
  h = await startConversationHarness({
    sandboxdEnv: { SANDBOXD_SERVICE_ROUTES: `git.test=127.0.0.1:${listener.port}` },
    engine: { gitEnv: { GIT_SSL_NO_VERIFY: 'true' }, lifecycle: { tickMs: 100 } },
  });
  sandbox = createSandboxClient({ baseUrl: h.sandboxd.url, token: h.sandboxd.token });
  user = await h.user();
  other = await h.user();
  const vault = await h.vault(user);
  const put = await h.api(user, 'POST', `/api/vaults/${vault}/secrets`, { key: 'TOKEN', value: SECRET });
  assert.equal(put.status, 201);
  const environment = await h.environment(user, { repos: [{ url: repoUrl }] });
  const agent = await h.agent(user, { environment_id: environment, vault_ids: [vault] });
  const conv = await h.start(user, { agent_id: agent, vault_id: vault, prompt: TURN_1 });
  conversationId = conv.id;
  const t1 = await h.waitForTurn(user, conv.id, 1, 120_000);
  assert.equal(t1.status, 'succeeded', t1.error ?? (await h.stdout(conv.id)));
  turn1 = t1.id;
});
after(async () => {
  await h?.close();
  git?.close();
  gitServer?.close();
});

describe('changes', () => {
  test('/changes shows exactly what the turn changed against the clone, redacted and bounded', async () => {
    const res = await h.api(user, 'GET', `/api/conversations/${conversationId}/changes`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const repos = res.body.repositories as Json[];
    assert.deepEqual(
      repos.map((r) => [r.dir, r.origin]),
      [
        ['app', 'cloned'],
        ['mine', 'created'],
      ],
    );
    const app = repos[0];
    assert.equal(app.base, baseSha);
    assert.equal(app.url, repoUrl);
    const files = byPath(app);
    assert.deepEqual(Object.keys(files).sort(), [
      'bin.dat',
      'committed.txt',
      'gone.txt',
      'large.txt',
      'renamed.txt',
      'secret.txt',
      'src/a.ts',
    ]);
    assert.deepEqual(
      { ...files['src/a.ts'] },
      {
        path: 'src/a.ts',
        old_path: null,
        status: 'modified',
        additions: 1,
        deletions: 1,
        binary: false,
        committed: false,
      },
    );
    assert.equal(files['renamed.txt'].status, 'renamed');
    assert.equal(files['renamed.txt'].old_path, 'old.txt');
    assert.equal(files['gone.txt'].status, 'deleted');
    assert.equal(files['gone.txt'].deletions, 1);
    assert.equal(files['bin.dat'].binary, true);
    assert.equal(files['large.txt'].additions, 3000);
    assert.equal(files['committed.txt'].committed, true);
    assert.equal(files['secret.txt'].committed, false);
    assert.ok(!JSON.stringify(res.body).includes(SECRET));

    // The agent's own repository, without a commit: compared with the empty tree.
    const mine = repos[1];
    assert.equal(mine.base, EMPTY_TREE);
    assert.equal(mine.head, null);
    assert.deepEqual(
      mine.files.map((f: Json) => [f.path, f.status, f.additions, f.committed]),
      [['hello.txt', 'added', 1, false]],
    );
  });

  test("one file's diff: exact, a secret redacted, a large or binary file not inlined", async () => {
    const file = async (repo: string, path: string) => {
      const q = new URLSearchParams({ repo, file: path });
      const res = await h.api(user, 'GET', `/api/conversations/${conversationId}/changes?${q}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.file as Json;
    };
    const a = await file('app', 'src/a.ts');
    assert.match(
      a.patch,
      /^diff --git a\/src\/a\.ts b\/src\/a\.ts\nindex [0-9a-f]+\.\.[0-9a-f]+ 100644\n--- a\/src\/a\.ts\n\+\+\+ b\/src\/a\.ts\n@@ -1,2 \+1,2 @@\n line1\n-line2\n\+CHANGED\n$/,
    );
    const secret = await file('app', 'secret.txt');
    assert.ok(!secret.patch.includes(SECRET), secret.patch);
    assert.ok(secret.patch.includes(`+token=${REDACTION_MARKER}`), secret.patch);
    const renamed = await file('app', 'renamed.txt');
    assert.match(renamed.patch, /rename from old\.txt\nrename to renamed\.txt/);
    const large = await file('app', 'large.txt');
    assert.equal(large.patch, null);
    assert.equal(large.patch_omitted, 'too_large');
    const bin = await file('app', 'bin.dat');
    assert.equal(bin.patch, null);
    assert.equal(bin.patch_omitted, 'binary');
    // Several repositories: ?file= names its repository.
    const ambiguous = await h.api(user, 'GET', `/api/conversations/${conversationId}/changes?file=README.md`);
    assert.equal(ambiguous.status, 422);
    const unchanged = await h.api(
      user,
      'GET',
      `/api/conversations/${conversationId}/changes?repo=app&file=README.md`,
    );
    assert.equal(unchanged.status, 404);
  });

  test("the user's repository is untouched: its index, refs and status as the agent left them", async () => {
    const name = await sandboxName(conversationId);
    // Only the agent's own `git mv` is staged; nothing Paddock did shows in the index.
    assert.equal(await sh(name, 'cd app && git diff --cached --name-status'), 'R100\told.txt\trenamed.txt\n');
    assert.equal(
      await sh(name, 'cd app && git for-each-ref --format="%(refname)"'),
      'refs/heads/main\nrefs/remotes/origin/HEAD\nrefs/remotes/origin/main\n',
    );
    assert.equal(await sh(name, 'cd mine && git status --porcelain'), '?? hello.txt\n');
  });

  test('paddock diff: the patches, --stat, --turn N', async () => {
    const stat = await paddock(['diff', conversationId, '--stat']);
    assert.equal(stat.code, 0, stat.stderr);
    assert.match(stat.stdout, /^ app\/src\/a\.ts +\| +2 \+-$/m);
    assert.match(stat.stdout, /^ app\/bin\.dat +\| Bin$/m);
    assert.match(stat.stdout, /^ app\/old\.txt => renamed\.txt +\| +0 $/m);
    assert.match(stat.stdout, /^ 8 files changed, 3004 insertions\(\+\), 2 deletions\(-\)$/m);
    assert.ok(!stat.stdout.includes('\x1b['), 'no colour when stdout is not a terminal');
    const patches = await paddock(['diff', conversationId, '--repo', 'app']);
    assert.equal(patches.code, 0, patches.stderr);
    assert.match(patches.stdout, /^diff --git a\/src\/a\.ts b\/src\/a\.ts\n[\s\S]*?^-line2\n\+CHANGED$/m);
    assert.match(patches.stdout, /^\+token=\[REDACTED\]$/m);
    assert.match(patches.stdout, /^File too large to show inline \(\+3000 -0\)/m);
    assert.ok(!patches.stdout.includes(SECRET));
    const turn = await paddock(['diff', conversationId, '--turn', '1', '--stat']);
    assert.equal(turn.code, 0, turn.stderr);
    assert.match(turn.stdout, /8 files changed/);
    const none = await paddock(['diff', conversationId, '--turn', '9']);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /has no turn 9/);
  });

  test("a turn's own changes are recorded, and survive a reclaim", async () => {
    const first = await h.api(user, 'GET', `/api/conversations/${conversationId}/turns/${turn1}/changes`);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.status, 'recorded');
    assert.equal(first.body.seq, 1);
    const app1 = first.body.repositories.find((r: Json) => r.dir === 'app');
    assert.equal(byPath(app1)['src/a.ts'].patch.includes('+CHANGED'), true);
    assert.ok(byPath(app1)['secret.txt'].patch.includes(REDACTION_MARKER));
    assert.ok(!JSON.stringify(first.body).includes(SECRET));
    assert.equal(byPath(app1)['large.txt'].patch_omitted, 'too_large');
    assert.ok(first.body.repositories.some((r: Json) => r.dir === 'mine'));

    const res = await h.api(user, 'POST', `/api/conversations/${conversationId}/prompts`, { prompt: TURN_2 });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const t2 = await h.waitForTurn(user, conversationId, 2, 60_000);
    assert.equal(t2.status, 'succeeded', t2.error ?? '');
    turn2 = t2.id;
    const read2 = async () => {
      for (let i = 0; i < 100; i++) {
        const r = await h.api(user, 'GET', `/api/conversations/${conversationId}/turns/${turn2}/changes`);
        if (r.body.status !== 'recording') return r;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error('turn 2 still recording');
    };
    const second = await read2();
    assert.equal(second.body.status, 'recorded');
    // Only what turn 2 did: README.md, not turn 1's files.
    assert.deepEqual(
      second.body.repositories.map((r: Json) => [
        r.dir,
        r.files.map((f: Json) => [f.path, f.status, f.additions]),
      ]),
      [['app', [['README.md', 'modified', 1]]]],
    );
    // The whole changes now hold both turns'.
    const all = await h.api(user, 'GET', `/api/conversations/${conversationId}/changes?repo=app`);
    assert.equal(all.body.repositories[0].files.length, 8);

    await h.reclaim(user, conversationId);
    const gone = await h.api(user, 'GET', `/api/conversations/${conversationId}/changes`);
    assert.equal(gone.status, 409);
    assert.equal(gone.body.error, 'sandbox_not_running');
    assert.match(gone.body.message, /send a prompt/);
    const kept = await h.api(user, 'GET', `/api/conversations/${conversationId}/turns/${turn2}/changes`);
    assert.equal(kept.status, 200);
    assert.deepEqual(kept.body, second.body);
  });

  test('a failure to record never fails the turn; a sandbox where the changes cannot be computed answers 409', async () => {
    const environment = await h.environment(user, { repos: [{ url: repoUrl }] });
    const agent = await h.agent(user, { environment_id: environment });
    // The agent puts a file where Paddock keeps its snapshot objects.
    const c = await h.start(user, {
      agent_id: agent,
      prompt:
        'rm -rf /home/sandbox/.paddock/changes && echo x > /home/sandbox/.paddock/changes && echo edit >> app/README.md',
    });
    const t = await h.waitForTurn(user, c.id, 1, 60_000);
    assert.equal(t.status, 'succeeded', t.error ?? '');
    let record: Json;
    for (let i = 0; i < 100; i++) {
      record = (await h.api(user, 'GET', `/api/conversations/${c.id}/turns/${t.id}/changes`)).body;
      if (record.status !== 'recording') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(record.status, 'failed');
    assert.equal(record.error, 'the changes could not be computed in the sandbox');
    assert.ok(h.logs.some((l) => l.includes("recording the turn's changes failed")));
    const res = await h.api(user, 'GET', `/api/conversations/${c.id}/changes`);
    assert.equal(res.status, 409);
    assert.equal(res.body.error, 'changes_unavailable');
    assert.match(res.body.message, /exit 3/);
    // The conversation goes on: the next turn runs.
    await h.api(user, 'POST', `/api/conversations/${c.id}/prompts`, { prompt: 'echo again' });
    assert.equal((await h.waitForTurn(user, c.id, 2, 60_000)).status, 'succeeded');
  });

  test('another tenant, a missing id and the sandbox key are refused', async () => {
    const c = await h.start(user, { agent_id: await h.agent(user), prompt: 'echo hi' });
    await h.waitForTurn(user, c.id, 1, 60_000);
    const [t] = await h.turns(user, c.id);
    for (const path of [
      `/api/conversations/${c.id}/changes`,
      `/api/conversations/${c.id}/turns/${t?.id}/changes`,
    ]) {
      const res = await h.api(other, 'GET', path);
      assert.equal(res.status, 404, path);
      assert.equal(res.body.error, 'not_found');
    }
    for (const path of [
      '/api/conversations/00000000-0000-4000-8000-000000000000/changes',
      '/api/conversations/not-a-uuid/changes',
      `/api/conversations/${c.id}/turns/not-a-uuid/changes`,
    ]) {
      const res = await h.api(user, 'GET', path);
      assert.equal(res.status, 404, path);
    }
    // The sandbox's own key (PADDOCK_TOKEN) may not read the owner's changes.
    const name = await sandboxName(c.id);
    const key = (await sh(name, '. /home/sandbox/.paddock/env && printf %s "$PADDOCK_TOKEN"')).trim();
    assert.ok(key.length > 10);
    const res = await h.api(null, 'GET', `/api/conversations/${c.id}/changes`, undefined, {
      authorization: `Bearer ${key}`,
    });
    assert.equal(res.status, 403);
    // A conversation without repositories answers an empty list.
    const none = await h.api(user, 'GET', `/api/conversations/${c.id}/changes`);
    assert.equal(none.status, 200);
    assert.deepEqual(none.body, { repositories: [] });
  });
});
