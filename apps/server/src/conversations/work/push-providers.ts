// Opening a pull request (GitHub) or a merge request (GitLab) for a pushed branch, through the
// provider's REST API with the environment repository's token. The server calls the API itself
// (not the sandbox): the token stays out of the sandbox's processes.
//
//   GitHub  GET  {api}/repos/{owner}/{repo}                      → default_branch
//           POST {api}/repos/{owner}/{repo}/pulls {title, head, base, body} → 201 {number, html_url}
//           422 "A pull request already exists" → GET {api}/repos/{owner}/{repo}/pulls?head={owner}:{branch}&state=open
//           headers: Accept: application/vnd.github+json, Authorization: Bearer <token>,
//                    X-GitHub-Api-Version: 2022-11-28
//   GitLab  GET  {api}/projects/{url-encoded path}               → default_branch
//           POST {api}/projects/{id}/merge_requests {source_branch, target_branch, title, description}
//                → 201 {iid, web_url}; 409 "already exists" → GET …/merge_requests?source_branch=…&state=opened
//           header: PRIVATE-TOKEN: <token>
//
// Which provider and API a remote has (docs/configuration.md): gitlab.com and the hosts of
// GITLAB_HOSTS are GitLab (API https://<host>/api/v4), every other host GitHub (github.com →
// https://api.github.com, another host → GitHub Enterprise at https://<host>/api/v3);
// GIT_HOST_API_URLS overrides the API base URL of a host.
//
// Invariants: the token is sent only in the header above, to the API of the repository's own
// host (or its configured override); never in a URL, an error or a log line. A provider's
// answer is quoted in errors only after the caller's redaction. Every failure is a PullRequestError
// with what to do; none is a 500.

export type Provider = 'github' | 'gitlab';

export interface GitHostsConfig {
  /** Hosts (lower-case, `host` or `host:port`) that are GitLab besides gitlab.com. */
  gitlabHosts: readonly string[];
  /** API base URL per remote host (`host` or `host:port`), e.g. a GitHub Enterprise or a test fake. */
  apiUrls: Readonly<Record<string, string>>;
}

export interface RemoteTarget {
  provider: Provider;
  /** The API base URL, without a trailing slash. */
  apiUrl: string;
  /** owner/repo (GitHub) or the project's full path (GitLab), without `.git`. */
  path: string;
}

/** The provider, API and project path of an https remote. */
export function remoteTarget(url: string, config: GitHostsConfig): RemoteTarget {
  const u = new URL(url);
  const host = u.host.toLowerCase();
  const hostname = u.hostname.toLowerCase();
  const path = u.pathname
    .replace(/^\/+/, '')
    .replace(/\/+$/, '')
    .replace(/\.git$/, '');
  const gitlab =
    hostname === 'gitlab.com' || config.gitlabHosts.includes(host) || config.gitlabHosts.includes(hostname);
  const override = config.apiUrls[host] ?? config.apiUrls[hostname];
  const provider: Provider = gitlab ? 'gitlab' : 'github';
  const apiUrl =
    override ??
    (gitlab
      ? `https://${u.host}/api/v4`
      : hostname === 'github.com'
        ? 'https://api.github.com'
        : `https://${u.host}/api/v3`);
  return { provider, apiUrl: apiUrl.replace(/\/+$/, ''), path };
}

export interface PullRequestInput {
  title: string;
  body: string;
  branch: string;
  /** The target branch; the repository's default branch when absent. */
  base?: string | undefined;
}

export interface OpenedPullRequest {
  provider: Provider;
  number: number;
  url: string;
  base: string;
  /** False when one was open for the branch already (it is returned instead). */
  created: boolean;
}

export class PullRequestError extends Error {
  /** 'auth': the token was refused; 'refused': the provider said no (its message quoted); 'unreachable'. */
  readonly kind: 'auth' | 'refused' | 'unreachable';
  constructor(kind: PullRequestError['kind'], message: string) {
    super(message);
    this.name = 'PullRequestError';
    this.kind = kind;
  }
}

const TIMEOUT_MS = 30_000;

type Json = Record<string, unknown>;

async function call(
  method: string,
  url: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      redirect: 'error',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch {
    throw new PullRequestError('unreachable', `the API at ${new URL(url).origin} did not answer`);
  }
  const text = await res.text().catch(() => '');
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: res.status, json };
}

/** The provider's own words for a refusal (GitHub: message and errors[].message; GitLab: message). */
function providerMessage(json: unknown): string {
  if (!json || typeof json !== 'object') return '';
  const o = json as Json;
  const parts: string[] = [];
  const message = o['message'];
  if (typeof message === 'string') parts.push(message);
  else if (Array.isArray(message)) parts.push(...message.filter((m): m is string => typeof m === 'string'));
  const errors = o['errors'];
  if (Array.isArray(errors)) {
    for (const e of errors) {
      if (e && typeof e === 'object' && typeof (e as Json)['message'] === 'string')
        parts.push((e as Json)['message'] as string);
    }
  }
  if (typeof o['error'] === 'string') parts.push(o['error'] as string);
  return parts.join(': ').slice(0, 500);
}

function authError(provider: Provider, status: number, json: unknown): PullRequestError {
  const scope =
    provider === 'github'
      ? 'pull_requests:write (fine-grained) or repo (classic)'
      : 'the api scope and at least the Developer role';
  const said = providerMessage(json);
  return new PullRequestError(
    'auth',
    `the ${provider === 'github' ? 'GitHub' : 'GitLab'} API refused the environment repository's token (HTTP ${status}${said ? `: ${said}` : ''}); give the token ${scope}`,
  );
}

export async function openPullRequest(
  target: RemoteTarget,
  token: string,
  input: PullRequestInput,
): Promise<OpenedPullRequest> {
  return target.provider === 'github'
    ? await openGitHub(target, token, input)
    : await openGitLab(target, token, input);
}

async function openGitHub(target: RemoteTarget, token: string, input: PullRequestInput) {
  const headers = {
    Accept: 'application/vnd.github+json',
    Authorization: `Bearer ${token}`,
    'X-GitHub-Api-Version': '2022-11-28',
    'User-Agent': 'paddock',
  };
  const [owner, repo, ...rest] = target.path.split('/');
  if (!owner || !repo || rest.length > 0)
    throw new PullRequestError('refused', `${target.path} is not an owner/repository path of GitHub`);
  const repoUrl = `${target.apiUrl}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}`;
  let base = input.base;
  if (base === undefined) {
    const r = await call('GET', repoUrl, headers);
    if (r.status === 401 || r.status === 403) throw authError('github', r.status, r.json);
    const def = (r.json as Json | null)?.['default_branch'];
    if (r.status !== 200 || typeof def !== 'string')
      throw new PullRequestError(
        'refused',
        `GitHub did not show the repository ${target.path} (HTTP ${r.status}${providerMessage(r.json) ? `: ${providerMessage(r.json)}` : ''}); check the token can read it`,
      );
    base = def;
  }
  const r = await call('POST', `${repoUrl}/pulls`, headers, {
    title: input.title,
    head: input.branch,
    base,
    body: input.body,
  });
  const pr = r.json as Json | null;
  if (r.status === 201 && typeof pr?.['number'] === 'number' && typeof pr['html_url'] === 'string')
    return { provider: 'github' as const, number: pr['number'], url: pr['html_url'], base, created: true };
  if (r.status === 401 || r.status === 403) throw authError('github', r.status, r.json);
  const said = providerMessage(r.json);
  if (r.status === 422 && /already exists/i.test(said)) {
    const q = new URLSearchParams({ head: `${owner}:${input.branch}`, state: 'open' });
    const list = await call('GET', `${repoUrl}/pulls?${q}`, headers);
    const first = Array.isArray(list.json) ? (list.json[0] as Json | undefined) : undefined;
    if (typeof first?.['number'] === 'number' && typeof first['html_url'] === 'string') {
      const firstBase = (first['base'] as Json | undefined)?.['ref'];
      return {
        provider: 'github' as const,
        number: first['number'],
        url: first['html_url'],
        base: typeof firstBase === 'string' ? firstBase : base,
        created: false,
      };
    }
  }
  throw new PullRequestError(
    'refused',
    `GitHub did not open the pull request (HTTP ${r.status}${said ? `: ${said}` : ''})`,
  );
}

async function openGitLab(target: RemoteTarget, token: string, input: PullRequestInput) {
  const headers = { 'PRIVATE-TOKEN': token, Accept: 'application/json' };
  const projectUrl = `${target.apiUrl}/projects/${encodeURIComponent(target.path)}`;
  let base = input.base;
  if (base === undefined) {
    const r = await call('GET', projectUrl, headers);
    if (r.status === 401 || r.status === 403) throw authError('gitlab', r.status, r.json);
    const def = (r.json as Json | null)?.['default_branch'];
    if (r.status !== 200 || typeof def !== 'string')
      throw new PullRequestError(
        'refused',
        `GitLab did not show the project ${target.path} (HTTP ${r.status}); check the token can read it`,
      );
    base = def;
  }
  const r = await call('POST', `${projectUrl}/merge_requests`, headers, {
    source_branch: input.branch,
    target_branch: base,
    title: input.title,
    description: input.body,
  });
  const mr = r.json as Json | null;
  if (r.status === 201 && typeof mr?.['iid'] === 'number' && typeof mr['web_url'] === 'string')
    return { provider: 'gitlab' as const, number: mr['iid'], url: mr['web_url'], base, created: true };
  if (r.status === 401 || r.status === 403) throw authError('gitlab', r.status, r.json);
  const said = providerMessage(r.json);
  if ((r.status === 409 || r.status === 422) && /already exists/i.test(said)) {
    const q = new URLSearchParams({ source_branch: input.branch, state: 'opened' });
    const list = await call('GET', `${projectUrl}/merge_requests?${q}`, headers);
    const first = Array.isArray(list.json) ? (list.json[0] as Json | undefined) : undefined;
    if (typeof first?.['iid'] === 'number' && typeof first['web_url'] === 'string') {
      const target = first['target_branch'];
      return {
        provider: 'gitlab' as const,
        number: first['iid'],
        url: first['web_url'],
        base: typeof target === 'string' ? target : base,
        created: false,
      };
    }
  }
  throw new PullRequestError(
    'refused',
    `GitLab did not open the merge request (HTTP ${r.status}${said ? `: ${said}` : ''})`,
  );
}
