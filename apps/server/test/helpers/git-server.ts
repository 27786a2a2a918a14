// A fake of an outside git host for clone and push tests: git's smart HTTP protocol (v0, stateless
// RPC, served by the real `git upload-pack` and `git receive-pack`) over TLS, on a listener the test
// hands in (a socket in the test network namespace, or a loopback one behind a service route, which
// the sandbox reaches through its egress proxy). Repositories can require a token, sent the way
// GitHub accepts it: `Authorization: Basic x-access-token:<token>`; a push always needs the
// repository's token (as on GitHub), and a protected branch is refused by a real pre-receive hook
// with GitHub's words ("GH006: Protected branch update failed").
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { createGunzip } from 'node:zlib';

export interface FakeGitHost {
  /** Creates a bare repository at `<owner>/<repo>` from commits (each a file map), tagging as asked. */
  addRepo(
    path: string,
    commits: { files: Record<string, string>; tag?: string }[],
    options?: { token?: string },
  ): { shas: string[] };
  /** Refuses pushes to these branches of a repository (a pre-receive hook, as GitHub's protection). */
  protect(path: string, branches: string[], options?: { say?: string }): void;
  /** Runs git in a repository's bare directory (e.g. `['rev-parse', 'refs/heads/x']`); trimmed stdout. */
  git(path: string, args: string[]): string;
  /** Runs while an upload-pack request is held (the client is mid-clone). */
  onUploadPack(hook: (() => Promise<void>) | null): void;
  /** Authorization headers seen, per request path. */
  readonly seen: { path: string; authorization: string | undefined }[];
  close(): void;
}

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: cwd,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.com',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.com',
      GIT_CONFIG_NOSYSTEM: '1',
    },
    encoding: 'utf8',
  }).trim();
}

function pkt(line: string): string {
  return (line.length + 4).toString(16).padStart(4, '0') + line;
}

export function startFakeGitHost(listener: net.Server): FakeGitHost {
  const root = mkdtempSync(join(os.tmpdir(), 'paddock-githost-'));
  const tls = join(root, 'tls');
  mkdirSync(tls);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=git.test',
      '-addext',
      'subjectAltName=DNS:git.test',
      '-keyout',
      join(tls, 'key.pem'),
      '-out',
      join(tls, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  const tokens = new Map<string, string>();
  const seen: FakeGitHost['seen'] = [];
  let hook: (() => Promise<void>) | null = null;

  const server = https.createServer(
    {
      key: readFileSync(join(tls, 'key.pem')),
      cert: readFileSync(join(tls, 'cert.pem')),
    },
    (req, res) => {
      const url = new URL(req.url ?? '/', 'https://git.test');
      seen.push({ path: url.pathname, authorization: req.headers.authorization });
      const m = /^\/(.+?)\/(info\/refs|git-upload-pack|git-receive-pack)$/.exec(url.pathname);
      const repoPath = m?.[1]?.replace(/\.git$/, '');
      if (!m || !repoPath || !tokens.has(repoPath)) {
        res.writeHead(404).end('not found\n');
        return;
      }
      const token = tokens.get(repoPath);
      const service =
        m[2] === 'info/refs'
          ? url.searchParams.get('service')
          : m[2] === 'git-receive-pack'
            ? m[2]
            : 'git-upload-pack';
      if (service === 'git-receive-pack' && !token) {
        // A push needs a token even to a public repository.
        res
          .writeHead(401, { 'www-authenticate': 'Basic realm="fake git host"' })
          .end('authentication required\n');
        return;
      }
      if (token) {
        const expected = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
        if (req.headers.authorization !== expected) {
          res
            .writeHead(401, { 'www-authenticate': 'Basic realm="fake git host"' })
            .end('authentication required\n');
          return;
        }
      }
      const dir = join(root, 'repos', `${repoPath}.git`);
      if (m[2] === 'info/refs') {
        if (service !== 'git-upload-pack' && service !== 'git-receive-pack') {
          res.writeHead(403).end();
          return;
        }
        const command = service.slice('git-'.length);
        const refs = execFileSync('git', [command, '--stateless-rpc', '--advertise-refs', dir]);
        res.writeHead(200, {
          'content-type': `application/x-${service}-advertisement`,
          'cache-control': 'no-cache',
        });
        res.end(Buffer.concat([Buffer.from(`${pkt(`# service=${service}\n`)}0000`), refs]));
        return;
      }
      const run = async () => {
        if (hook && m[2] === 'git-upload-pack') await hook();
        const child = spawn(
          'git',
          [m[2] === 'git-receive-pack' ? 'receive-pack' : 'upload-pack', '--stateless-rpc', dir],
          {
            stdio: ['pipe', 'pipe', 'ignore'],
          },
        );
        res.writeHead(200, {
          'content-type': `application/x-${m[2]}-result`,
          'cache-control': 'no-cache',
        });
        const body = req.headers['content-encoding'] === 'gzip' ? req.pipe(createGunzip()) : req;
        body.pipe(child.stdin);
        child.stdout.pipe(res);
      };
      run().catch(() => res.destroy());
    },
  );
  listener.on('connection', (socket) => server.emit('connection', socket));

  return {
    addRepo(path, commits, options = {}) {
      const bare = join(root, 'repos', `${path}.git`);
      mkdirSync(bare, { recursive: true });
      git(bare, ['init', '--quiet', '--bare', '--initial-branch=main']);
      const work = mkdtempSync(join(root, 'work-'));
      git(work, ['init', '--quiet', '--initial-branch=main']);
      const shas: string[] = [];
      for (const commit of commits) {
        for (const [file, content] of Object.entries(commit.files)) {
          mkdirSync(join(work, file, '..'), { recursive: true });
          writeFileSync(join(work, file), content);
        }
        git(work, ['add', '-A']);
        git(work, ['commit', '--quiet', '-m', `commit ${shas.length + 1}`]);
        shas.push(git(work, ['rev-parse', 'HEAD']));
        if (commit.tag) git(work, ['tag', commit.tag]);
      }
      git(work, ['push', '--quiet', '--tags', bare, 'main']);
      tokens.set(path, options.token ?? '');
      return { shas };
    },
    protect(path, branches, options = {}) {
      const file = join(root, 'repos', `${path}.git`, 'hooks', 'pre-receive');
      const refs = branches.map((b) => `refs/heads/${b}`).join(' ');
      writeFileSync(
        file,
        [
          '#!/bin/sh',
          'while read -r old new ref; do',
          `  case " ${refs} " in *" $ref "*)`,
          '    echo "error: GH006: Protected branch update failed for $ref." >&2',
          '    echo "error: Changes must be made through a pull request." >&2',
          ...(options.say ? [`    echo 'remote says: ${options.say.replaceAll("'", '')}' >&2`] : []),
          '    exit 1;;',
          '  esac',
          'done',
          '',
        ].join('\n'),
        { mode: 0o755 },
      );
    },
    git(path, args) {
      return git(join(root, 'repos', `${path}.git`), args);
    },
    onUploadPack(h) {
      hook = h;
    },
    seen,
    close() {
      server.close();
      server.closeAllConnections();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
