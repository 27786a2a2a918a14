// The pure parts of the push: branch names (git check-ref-format's rules), the default commit
// subject, which provider and API a remote has, and how git's refusals are told apart.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { branchNameProblem, commitSubject, defaultBranchName } from './push-branch.ts';
import { classifyPushFailure } from './push-git.ts';
import { remoteTarget } from './push-providers.ts';

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
