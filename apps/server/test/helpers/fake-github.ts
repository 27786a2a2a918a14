// A loopback fake of the part of GitHub's REST API that opening a pull request uses, with the
// documented request and response shapes (docs.github.com/en/rest/pulls/pulls#create-a-pull-request,
// /repos#get-a-repository), including the refusals: 401 "Bad credentials" for any other
// Authorization than `Bearer <the repository's token>`, 400 for a missing or unsupported
// X-GitHub-Api-Version, 415 without a JSON body, 422 "Validation Failed" for a missing field, an
// unknown head branch (asked of the fake git host) or "A pull request already exists for
// owner:branch.". Every request is recorded with its headers and body.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeGitHubRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface FakePull {
  number: number;
  title: string;
  body: string | null;
  head: string;
  base: string;
  html_url: string;
}

export interface FakeGitHub {
  /** http://127.0.0.1:<port> (the API base URL of GIT_HOST_API_URLS). */
  url: string;
  addRepo(
    path: string,
    options: { token: string; defaultBranch?: string; branchExists: (b: string) => boolean },
  ): void;
  pulls(path: string): FakePull[];
  readonly requests: FakeGitHubRequest[];
  close(): Promise<void>;
}

interface Repo {
  token: string;
  defaultBranch: string;
  branchExists: (b: string) => boolean;
  pulls: FakePull[];
}

const DOCS = 'https://docs.github.com/rest';

export async function startFakeGitHub(): Promise<FakeGitHub> {
  const repos = new Map<string, Repo>();
  const requests: FakeGitHubRequest[] = [];
  let next = 1;
  let origin = '';

  const pullJson = (path: string, p: FakePull) => {
    const [owner] = path.split('/');
    return {
      url: `${origin}/repos/${path}/pulls/${p.number}`,
      id: 1000 + p.number,
      html_url: p.html_url,
      number: p.number,
      state: 'open',
      title: p.title,
      body: p.body,
      head: { label: `${owner}:${p.head}`, ref: p.head },
      base: { label: `${owner}:${p.base}`, ref: p.base },
      draft: false,
      merged: false,
    };
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = raw;
      }
      const url = new URL(req.url ?? '/', 'http://api.test');
      requests.push({
        method: req.method ?? '',
        path: `${url.pathname}${url.search}`,
        headers: req.headers,
        body,
      });
      const send = (status: number, json: unknown) => {
        res
          .writeHead(status, { 'content-type': 'application/json; charset=utf-8' })
          .end(JSON.stringify(json));
      };
      const m = /^\/repos\/([^/]+)\/([^/]+)(\/pulls)?$/.exec(url.pathname);
      const path = m ? `${decodeURIComponent(m[1] ?? '')}/${decodeURIComponent(m[2] ?? '')}` : '';
      const repo = repos.get(path);
      if (!m || !repo) return send(404, { message: 'Not Found', documentation_url: DOCS, status: '404' });
      const version = req.headers['x-github-api-version'];
      if (version !== undefined && version !== '2022-11-28')
        return send(400, { message: `Invalid API version ${String(version)}`, documentation_url: DOCS });
      if (req.headers.authorization !== `Bearer ${repo.token}`)
        return send(401, { message: 'Bad credentials', documentation_url: DOCS, status: '401' });
      if (!m[3] && req.method === 'GET') {
        const [owner, name] = path.split('/');
        return send(200, {
          id: 1,
          name,
          full_name: path,
          owner: { login: owner },
          private: true,
          html_url: `https://github.test/${path}`,
          default_branch: repo.defaultBranch,
        });
      }
      if (m[3] && req.method === 'GET') {
        const head = url.searchParams.get('head');
        const [owner] = path.split('/');
        const list = repo.pulls.filter((p) => head === null || head === `${owner}:${p.head}`);
        return send(
          200,
          list.map((p) => pullJson(path, p)),
        );
      }
      if (m[3] && req.method === 'POST') {
        if (
          !String(req.headers['content-type'] ?? '').startsWith('application/json') ||
          typeof body !== 'object' ||
          !body
        )
          return send(415, { message: 'Unsupported Media Type', documentation_url: DOCS });
        const b = body as Record<string, unknown>;
        for (const field of ['title', 'head', 'base'] as const) {
          if (typeof b[field] !== 'string' || b[field] === '')
            return send(422, {
              message: 'Validation Failed',
              errors: [{ resource: 'PullRequest', field, code: 'missing_field' }],
              documentation_url: DOCS,
            });
        }
        const head = b['head'] as string;
        const base = b['base'] as string;
        if (!repo.branchExists(head) || !repo.branchExists(base))
          return send(422, {
            message: 'Validation Failed',
            errors: [
              { resource: 'PullRequest', field: repo.branchExists(head) ? 'base' : 'head', code: 'invalid' },
            ],
            documentation_url: DOCS,
          });
        const [owner] = path.split('/');
        if (repo.pulls.some((p) => p.head === head))
          return send(422, {
            message: 'Validation Failed',
            errors: [
              {
                resource: 'PullRequest',
                code: 'custom',
                message: `A pull request already exists for ${owner}:${head}.`,
              },
            ],
            documentation_url: DOCS,
          });
        const pull: FakePull = {
          number: next++,
          title: b['title'] as string,
          body: typeof b['body'] === 'string' ? b['body'] : null,
          head,
          base,
          html_url: '',
        };
        pull.html_url = `https://github.test/${path}/pull/${pull.number}`;
        repo.pulls.push(pull);
        return send(201, pullJson(path, pull));
      }
      return send(404, { message: 'Not Found', documentation_url: DOCS, status: '404' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: origin,
    addRepo(path, options) {
      repos.set(path, {
        token: options.token,
        defaultBranch: options.defaultBranch ?? 'main',
        branchExists: options.branchExists,
        pulls: [],
      });
    },
    pulls: (path) => repos.get(path)?.pulls ?? [],
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
