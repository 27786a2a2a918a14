// The `clone` stage and source-based skills: one clone routine for both.
//
// Invariants:
// - https only, checked again here (the schema already refuses anything else): a URL that is not
//   https, or that carries credentials, is never handed to git.
// - A token never reaches the process list or the repository's config: it travels as an
//   `http.<origin>/.extraHeader` set through the exec env (GIT_CONFIG_COUNT/KEY/VALUE), which git
//   reads for that process only and never writes to .git/config. The header is scoped to the
//   repository's origin, so a redirect to another host does not carry it.
// - URL, directory and ref are positional arguments of a fixed script (never interpolated into
//   shell text); the ref cannot start with "-" (schema) and is passed after the options.
// - git never prompts (GIT_TERMINAL_PROMPT=0): a wrong token fails the stage instead of hanging.
import type { SandboxClient } from '@paddock/sandbox-client';
import { repoUrlProblem } from '../../environments/environments.schema.ts';
import { type LogWriter, ProvisionError } from '../contracts.ts';
import type { StageName } from '../conversations.tables.ts';
import { runStreaming } from './sandbox-commands.ts';

/** Spec rule 2: a clone may take 600 s. */
export const CLONE_TIMEOUT_MS = 600_000;

export interface CloneSpec {
  url: string;
  ref?: string | undefined;
  /** The access token's value (already decrypted and registered with the redactor). */
  token?: string | undefined;
  /** Absolute target directory in the sandbox. */
  dir: string;
}

const CLONE_SCRIPT = [
  'set -e',
  'url=$1; dir=$2; ref=$3',
  'if [ -e "$dir" ]; then echo "clone: $dir already exists" >&2; exit 2; fi',
  'mkdir -p -- "$(dirname -- "$dir")"',
  'git clone --quiet --no-checkout -- "$url" "$dir"',
  'cd -- "$dir"',
  'if [ -n "$ref" ]; then git checkout --quiet "$ref" --; else git checkout --quiet; fi',
].join('\n');

/** The directory name a repository is cloned under: the last path segment without `.git`. */
export function repoDirName(url: string): string {
  const last = new URL(url).pathname.split('/').filter(Boolean).at(-1) ?? 'repo';
  const name = last.replace(/\.git$/, '').replace(/[^A-Za-z0-9._-]/g, '-');
  return name === '' || name === '.' || name === '..' ? 'repo' : name;
}

/** The directory (under /home/sandbox) of each repository, in order: a repeated name gets -2, -3, … */
export function cloneDirs(repos: readonly { url: string }[]): string[] {
  const used = new Set<string>();
  return repos.map((repo) => {
    let dir = repoDirName(repo.url);
    for (let n = 2; used.has(dir); n++) dir = `${repoDirName(repo.url)}-${n}`;
    used.add(dir);
    return dir;
  });
}

/** The exec env that authenticates git to the repository's origin, without writing any config. */
export function gitAuthEnv(url: string, token: string | undefined): Record<string, string> {
  const env: Record<string, string> = { GIT_TERMINAL_PROMPT: '0' };
  if (token === undefined || token === '') return env;
  const origin = new URL(url).origin;
  const basic = Buffer.from(`x-access-token:${token}`, 'utf8').toString('base64');
  env['GIT_CONFIG_COUNT'] = '1';
  env['GIT_CONFIG_KEY_0'] = `http.${origin}/.extraHeader`;
  env['GIT_CONFIG_VALUE_0'] = `Authorization: Basic ${basic}`;
  return env;
}

/** Clones one repository into the sandbox; output streams to `writer`. Throws ProvisionError(stage). */
export async function cloneRepo(
  sandbox: SandboxClient,
  name: string,
  spec: CloneSpec,
  options: {
    stage: StageName;
    writer: Pick<LogWriter, 'output'> | null;
    /** Extra env for git (e.g. GIT_SSL_CAINFO for a private CA). */
    env?: Record<string, string>;
    signal?: AbortSignal;
    timeoutMs?: number;
  },
): Promise<void> {
  const problem = repoUrlProblem(spec.url);
  if (problem) throw new ProvisionError(options.stage, `cannot clone ${safeUrl(spec.url)}: ${problem}`);
  const timeoutMs = options.timeoutMs ?? CLONE_TIMEOUT_MS;
  const outcome = await runStreaming(
    sandbox,
    name,
    {
      argv: ['sh', '-c', CLONE_SCRIPT, 'paddock-clone', spec.url, spec.dir, spec.ref ?? ''],
      env: { ...options.env, ...gitAuthEnv(spec.url, spec.token) },
      timeoutMs,
    },
    options.writer,
    options.signal,
  );
  if ('timedOut' in outcome) {
    throw new ProvisionError(
      options.stage,
      `cloning ${safeUrl(spec.url)} did not finish within ${Math.round(timeoutMs / 1000)} s`,
    );
  }
  if (outcome.exitCode !== 0) {
    throw new ProvisionError(
      options.stage,
      `cloning ${safeUrl(spec.url)}${spec.ref ? ` at ${spec.ref}` : ''} failed (exit ${outcome.exitCode}); git's output is in the conversation's log`,
    );
  }
}

/** The URL for a message: origin and path only. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return 'the repository';
  }
}
