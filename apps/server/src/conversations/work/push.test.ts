// The pure parts of the push: branch names (git check-ref-format's rules), the default commit
// subject, which provider and API a remote has, and how git's refusals are told apart.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { branchNameProblem, commitSubject, defaultBranchName } from './push-branch.ts';
import { classifyPushFailure } from './push-git.ts';
import { openPullRequest, PullRequestError, remoteTarget } from './push-providers.ts';

/** What git itself says of a branch name. */
function gitAccepts(name: string): boolean {
  try {
    execFileSync('git', ['check-ref-format', '--branch', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('push: branch names, subjects, providers, refusals', () => {
  it('refuses exactly the branch names git check-ref-format --branch refuses', () => {
    const names = [
      'feature/x',
      'paddock/abc-1',
      'a.b',
      'v1.0',
      '../x',
      'a..b',
      'a b',
      '-x',
      'x.lock',
      'a/x.lock/b',
      'a//b',
      '/a',
      'a/',
      'a.',
      '.a',
      'a/.b',
      'x@{1}',
      'a~1',
      'a^',
      'a:b',
      'a?',
      'a*',
      'a[b',
      'a\\b',
      'a\tb',
      'ok-é',
    ];
    // "@" alone is refused here too, where git's --branch reads it as the current branch.
    assert.ok(branchNameProblem('@'));
    for (const name of names) {
      assert.equal(branchNameProblem(name) === null, gitAccepts(name), name);
    }
  });

  it('names the default branch from the random end of the conversation id', () => {
    assert.equal(defaultBranchName('01a23544-a96a-72bd-9da9-85cb830e1c15', 2), 'paddock/830e1c15-2');
  });

  it("takes the commit subject from the prompt's first non-empty line, at most 72 characters", () => {
    assert.equal(commitSubject('\n  Fix the bug  \nmore'), 'Fix the bug');
    assert.equal(commitSubject('## Fix the bug\nmore'), 'Fix the bug');
    const long = commitSubject('x'.repeat(100));
    assert.equal([...long].length, 72);
    assert.ok(long.endsWith('…'));
  });

  it('picks GitHub, GitHub Enterprise or GitLab by host, with per-host API overrides', () => {
    const none = { gitlabHosts: [], apiUrls: {} };
    assert.deepEqual(remoteTarget('https://github.com/acme/app.git', none), {
      provider: 'github',
      apiUrl: 'https://api.github.com',
      path: 'acme/app',
    });
    assert.deepEqual(remoteTarget('https://ghe.corp/acme/app', none), {
      provider: 'github',
      apiUrl: 'https://ghe.corp/api/v3',
      path: 'acme/app',
    });
    assert.deepEqual(remoteTarget('https://gitlab.com/group/sub/app.git', none), {
      provider: 'gitlab',
      apiUrl: 'https://gitlab.com/api/v4',
      path: 'group/sub/app',
    });
    const configured = { gitlabHosts: ['git.corp'], apiUrls: { 'git.test': 'http://127.0.0.1:1/' } };
    assert.equal(remoteTarget('https://git.corp:8443/g/app.git', configured).provider, 'gitlab');
    assert.equal(remoteTarget('https://git.test:4443/a/b.git', configured).apiUrl, 'http://127.0.0.1:1');
  });

  it("tells git's refusals apart by its porcelain status line, then its stderr", () => {
    const to = 'To https://git.test/acme/app.git\n';
    assert.equal(
      classifyPushFailure(`${to}!\tabc:refs/heads/x\t[rejected] (non-fast-forward)\nDone\n`, ''),
      'exists',
    );
    assert.equal(
      classifyPushFailure(`${to}!\tabc:refs/heads/x\t[rejected] (fetch first)\nDone\n`, ''),
      'exists',
    );
    assert.equal(
      classifyPushFailure(`${to}!\tabc:refs/heads/main\t[remote rejected] (pre-receive hook declined)\n`, ''),
      'rejected',
    );
    assert.equal(
      classifyPushFailure('', "fatal: Authentication failed for 'https://git.test/acme/app.git/'"),
      'auth',
    );
    assert.equal(classifyPushFailure('', 'fatal: could not read Username for https://git.test'), 'auth');
    assert.equal(classifyPushFailure('', 'fatal: unable to access: Could not resolve host'), 'failed');
  });
});

/**
 * A loopback fake of GitLab's merge request API (docs.gitlab.com/api/merge_requests): PRIVATE-TOKEN,
 * the project by its URL-encoded path, 409 with ["Another open merge request already exists for
 * this source branch: !1"] for a second one, 401 {"message":"401 Unauthorized"}.
 */
async function fakeGitLab(token: string) {
  const mrs: { iid: number; source_branch: string; target_branch: string; title: string }[] = [];
  const seen: { method: string; url: string; body: unknown }[] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => {
      raw += String(c);
    });
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : null;
      seen.push({ method: req.method ?? '', url: req.url ?? '', body });
      const send = (status: number, json: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
      if (req.headers['private-token'] !== token) return send(401, { message: '401 Unauthorized' });
      const url = new URL(req.url ?? '/', 'http://x');
      if (!url.pathname.startsWith('/api/v4/projects/group%2Fsub%2Fapp'))
        return send(404, { message: '404 Project Not Found' });
      const rest = url.pathname.slice('/api/v4/projects/group%2Fsub%2Fapp'.length);
      if (rest === '' && req.method === 'GET')
        return send(200, { id: 7, path_with_namespace: 'group/sub/app', default_branch: 'trunk' });
      if (rest === '/merge_requests' && req.method === 'GET')
        return send(
          200,
          mrs
            .filter((m) => m.source_branch === url.searchParams.get('source_branch'))
            .map((m) => ({ ...m, web_url: `https://gitlab.test/group/sub/app/-/merge_requests/${m.iid}` })),
        );
      if (rest === '/merge_requests' && req.method === 'POST') {
        const existing = mrs.find((m) => m.source_branch === body.source_branch);
        if (existing)
          return send(409, {
            message: [`Another open merge request already exists for this source branch: !${existing.iid}`],
          });
        const mr = {
          iid: mrs.length + 1,
          source_branch: body.source_branch,
          target_branch: body.target_branch,
          title: body.title,
        };
        mrs.push(mr);
        return send(201, {
          ...mr,
          id: 100 + mr.iid,
          web_url: `https://gitlab.test/group/sub/app/-/merge_requests/${mr.iid}`,
        });
      }
      return send(404, { message: '404 Not Found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v4`,
    seen,
    close: () => server.close(),
  };
}

describe('push: GitLab merge requests', () => {
  it('opens a merge request into the default branch, returns the open one the second time, names the scope on 401', async () => {
    const gl = await fakeGitLab('glpat-right');
    try {
      const target = remoteTarget('https://gitlab.test/group/sub/app.git', {
        gitlabHosts: ['gitlab.test'],
        apiUrls: { 'gitlab.test': gl.url },
      });
      assert.equal(target.provider, 'gitlab');
      const input = { title: 'Fix it', body: 'by Paddock', branch: 'paddock/x-1' };
      const first = await openPullRequest(target, 'glpat-right', input);
      assert.deepEqual(first, {
        provider: 'gitlab',
        number: 1,
        url: 'https://gitlab.test/group/sub/app/-/merge_requests/1',
        base: 'trunk',
        created: true,
      });
      const post = gl.seen.find((s) => s.method === 'POST');
      assert.deepEqual(post?.body, {
        source_branch: 'paddock/x-1',
        target_branch: 'trunk',
        title: 'Fix it',
        description: 'by Paddock',
      });
      const again = await openPullRequest(target, 'glpat-right', input);
      assert.equal(again.created, false);
      assert.equal(again.number, 1);
      await assert.rejects(openPullRequest(target, 'glpat-wrong', input), (err: unknown) => {
        assert.ok(err instanceof PullRequestError);
        assert.equal(err.kind, 'auth');
        assert.match(err.message, /GitLab API refused .* give the token the api scope/);
        assert.ok(!err.message.includes('glpat-wrong'));
        return true;
      });
    } finally {
      gl.close();
    }
  });
});
