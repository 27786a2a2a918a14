// The two commands of a push, run in the live sandbox through the sandbox client: commit (what
// the agent left uncommitted, on the branch) and push (that commit to the environment
// repository's URL, with its token).
//
// Invariants (test/conversations.push.test.ts):
// - Fixed scripts: every argument (directory, branch, commit, URL) is a positional parameter of
//   `sh -c SCRIPT`, never interpolated into shell text; the message travels on stdin.
// - The token never reaches argv, a file, a repository's config or the output: it is an
//   `http.<origin>/.extraHeader` in the push command's environment (repos.ts gitAuthEnv), scoped
//   to the repository's origin. Everything either command prints passes the conversation's
//   redactor before it reaches an error message.
// - The push never runs the agent's git configuration or hooks while the token is in its
//   environment: it pushes from a fresh bare repository (its own config, no templates, no hooks)
//   that borrows the objects of the agent's repository (objects/info/alternates), with the system
//   and global configuration turned off (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null). So a
//   `url.*.insteadOf`, `http.proxy`, `http.sslVerify=false` or a pre-push hook the agent wrote
//   cannot redirect or read the token. It runs as the sandbox's root: the agent's processes (the
//   sandbox user) cannot read its /proc/<pid>/environ.
// - It pushes to the environment repository's URL, not to the repository's `origin` (which the
//   agent may have changed).
// - The commit runs as the sandbox user (the files are the agent's), without hooks, signing or
//   the token; author and committer come from its environment (push.service.ts).
import type { SandboxClient } from '@paddock/sandbox-client';
import { SandboxTimeoutError } from '@paddock/sandbox-client';
import { gitAuthEnv } from '../provisioning/repos.ts';

/** A commit or a push gets this long (a large first push of a big repository). */
export const PUSH_TIMEOUT_MS = 300_000;
/** How much of git's output an error message quotes (after redaction). */
const QUOTE_MAX_CHARS = 1500;

/** Exit codes of COMMIT_SCRIPT (beyond git's own). */
export const COMMIT_EXIT = {
  notARepository: 10,
  badBranch: 11,
  localBranchExists: 12,
  noCommits: 13,
} as const;

const COMMIT_SCRIPT = [
  'set -e',
  'dir=$1; branch=$2',
  `cd -- "$dir" 2>/dev/null || exit ${COMMIT_EXIT.notARepository}`,
  `top=$(git rev-parse --show-toplevel 2>/dev/null) || exit ${COMMIT_EXIT.notARepository}`,
  `[ "$top" = "$(pwd -P)" ] || exit ${COMMIT_EXIT.notARepository}`,
  `git check-ref-format --branch "$branch" >/dev/null 2>&1 || exit ${COMMIT_EXIT.badBranch}`,
  'current=$(git symbolic-ref --quiet --short HEAD 2>/dev/null || true)',
  'if [ "$current" != "$branch" ]; then',
  `  if git show-ref --verify --quiet "refs/heads/$branch"; then exit ${COMMIT_EXIT.localBranchExists}; fi`,
  '  git checkout --quiet -b "$branch"',
  'fi',
  'git add -A',
  'committed=0',
  'if ! git diff --cached --quiet; then git commit --quiet --no-verify --no-gpg-sign -F -; committed=1; fi',
  `git rev-parse --verify --quiet HEAD >/dev/null || exit ${COMMIT_EXIT.noCommits}`,
  'objects=$(git rev-parse --path-format=absolute --git-common-dir)/objects',
  'printf "committed=%s\\nsha=%s\\nobjects=%s\\n" "$committed" "$(git rev-parse HEAD)" "$objects"',
].join('\n');

const PUSH_SCRIPT = [
  'set -e',
  'objects=$1; sha=$2; branch=$3; url=$4',
  'tmp=$(mktemp -d /tmp/paddock-push.XXXXXX)',
  'trap \'rm -rf -- "$tmp"\' EXIT',
  // HOME: a directory of root's own (not /tmp, where the agent could leave a .netrc).
  'HOME="$tmp/home"; mkdir -m 700 -- "$HOME"; export HOME',
  'git init --quiet --bare --template= -- "$tmp/repo"',
  'printf "%s\\n" "$objects" > "$tmp/repo/objects/info/alternates"',
  'git --git-dir="$tmp/repo" push --porcelain -- "$url" "$sha:refs/heads/$branch"',
].join('\n');

/** The environment every git command of a push gets: no prompt, no hooks, no signing. */
function baseGitEnv(extra: Record<string, string>): Record<string, string> {
  return { ...extra, GIT_TERMINAL_PROMPT: '0', GIT_OPTIONAL_LOCKS: '0' };
}

/** Adds config entries after those of `env` (GIT_CONFIG_COUNT/KEY/VALUE). */
function withConfig(env: Record<string, string>, entries: [string, string][]): Record<string, string> {
  const out = { ...env };
  let n = Number(out['GIT_CONFIG_COUNT'] ?? '0');
  for (const [key, value] of entries) {
    out[`GIT_CONFIG_KEY_${n}`] = key;
    out[`GIT_CONFIG_VALUE_${n}`] = value;
    n++;
  }
  out['GIT_CONFIG_COUNT'] = String(n);
  return out;
}

export interface Identity {
  name: string;
  email: string;
}

export type CommitOutcome =
  | { ok: true; committed: boolean; sha: string; objects: string }
  | { ok: false; exitCode: number; output: string }
  | { ok: false; timedOut: true };

export async function commitInSandbox(
  sandbox: SandboxClient,
  name: string,
  input: { dir: string; branch: string; message: string; author: Identity; committer: Identity },
  gitEnv: Record<string, string>,
): Promise<CommitOutcome> {
  const env = withConfig(
    {
      ...baseGitEnv(gitEnv),
      GIT_AUTHOR_NAME: input.author.name,
      GIT_AUTHOR_EMAIL: input.author.email,
      GIT_COMMITTER_NAME: input.committer.name,
      GIT_COMMITTER_EMAIL: input.committer.email,
    },
    [
      ['core.hooksPath', '/dev/null'],
      ['commit.gpgSign', 'false'],
    ],
  );
  try {
    const res = await sandbox.exec(name, {
      cmd: ['sh', '-c', COMMIT_SCRIPT, 'paddock-commit', input.dir, input.branch],
      env,
      stdin: input.message,
      timeoutMs: PUSH_TIMEOUT_MS,
      maxOutputBytes: 64 * 1024,
    });
    if (res.exitCode !== 0) {
      return { ok: false, exitCode: res.exitCode, output: `${res.stderr}${res.stdout}` };
    }
    const fields = Object.fromEntries(
      res.stdout
        .toString('utf8')
        .split('\n')
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    return {
      ok: true,
      committed: fields['committed'] === '1',
      sha: fields['sha'] ?? '',
      objects: fields['objects'] ?? '',
    };
  } catch (err) {
    if (err instanceof SandboxTimeoutError) return { ok: false, timedOut: true };
    throw err;
  }
}

export type PushOutcome =
  | { ok: true }
  | {
      ok: false;
      kind: 'exists' | 'rejected' | 'auth' | 'failed' | 'timeout';
      /** git's own words (the porcelain status and the remote's lines), not yet redacted. */
      output: string;
    };

export async function pushFromSandbox(
  sandbox: SandboxClient,
  name: string,
  input: { objects: string; sha: string; branch: string; url: string; token: string },
  gitEnv: Record<string, string>,
): Promise<PushOutcome> {
  const env = {
    ...withConfig(
      {
        ...baseGitEnv(gitEnv),
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        ...gitAuthEnv(input.url, input.token),
      },
      [
        ['core.hooksPath', '/dev/null'],
        ['safe.directory', '*'],
      ],
    ),
  };
  let res: Awaited<ReturnType<SandboxClient['exec']>>;
  try {
    res = await sandbox.exec(name, {
      cmd: ['sh', '-c', PUSH_SCRIPT, 'paddock-push', input.objects, input.sha, input.branch, input.url],
      env,
      user: 'root',
      timeoutMs: PUSH_TIMEOUT_MS,
      maxOutputBytes: 64 * 1024,
    });
  } catch (err) {
    if (err instanceof SandboxTimeoutError) return { ok: false, kind: 'timeout', output: '' };
    throw err;
  }
  if (res.exitCode === 0) return { ok: true };
  const stdout = res.stdout.toString('utf8');
  const stderr = res.stderr.toString('utf8');
  return { ok: false, kind: classifyPushFailure(stdout, stderr), output: quoteGit(stdout, stderr) };
}

/** What kind of refusal git reported (its porcelain status line first, then its stderr). */
export function classifyPushFailure(
  stdout: string,
  stderr: string,
): 'exists' | 'rejected' | 'auth' | 'failed' {
  const status = stdout.split('\n').find((line) => line.startsWith('!')) ?? '';
  if (/remote rejected/.test(status)) return 'rejected';
  if (/non-fast-forward|fetch first|already exists|stale info/.test(status)) return 'exists';
  if (status !== '') return 'rejected';
  if (
    /Authentication failed|could not read Username|could not read Password|returned error: (401|403)|Invalid username or password|Permission to .* denied/i.test(
      stderr,
    )
  )
    return 'auth';
  return 'failed';
}

/** The lines of git's output worth quoting: the remote's words and the refusals, bounded. */
function quoteGit(stdout: string, stderr: string): string {
  const lines = [
    ...stderr.split('\n').filter((l) => /^(remote:|error:|fatal:|hint:)/.test(l.trim())),
    ...stdout.split('\n').filter((l) => l.startsWith('!')),
  ]
    .map((l) => l.trimEnd())
    .filter((l) => l !== '' && !/^remote:\s*$/.test(l) && !/^hint:/.test(l));
  const text = lines.join('\n');
  return text.length > QUOTE_MAX_CHARS ? `${text.slice(0, QUOTE_MAX_CHARS)}…` : text;
}

/** Bounded text of a failed command's output (for a failed commit). */
export function quoteOutput(output: string): string {
  const text = output.trim();
  return text.length > QUOTE_MAX_CHARS ? `…${text.slice(-QUOTE_MAX_CHARS)}` : text;
}
