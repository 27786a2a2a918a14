// paddock push <conversation>: commits the agent's uncommitted work in the conversation's live
// sandbox, pushes it as a branch with the environment repository's token, and with --pr opens a
// pull request (POST /api/conversations/:id/push). The server's refusals (no token, protected
// branch, branch exists, sandbox not running) are printed as it words them: each says what to do.
import type { Command } from 'commander';
import { type CommandContext, conversationPath } from './conversations.ts';
import { json, withProgress } from './output.ts';

interface PushResult {
  push: { repo: string; branch: string; commit: string; committed: boolean; remote: string };
  pull_request: {
    provider: 'github' | 'gitlab';
    number: number;
    url: string;
    created: boolean;
    base: string;
  } | null;
}

export function renderPush(result: PushResult): string {
  const p = result.push;
  const lines = [
    `${p.committed ? 'Committed and pushed' : 'Pushed'} ${p.repo} to ${p.branch} (${p.commit.slice(0, 12)}) on ${p.remote}`,
  ];
  const pr = result.pull_request;
  if (pr) {
    const kind = pr.provider === 'gitlab' ? `merge request !${pr.number}` : `pull request #${pr.number}`;
    lines.push(`${pr.created ? 'Opened' : 'Already open:'} ${kind} into ${pr.base}: ${pr.url}`);
  }
  return lines.join('\n');
}

export function registerPushCommand(program: Command, ctx: CommandContext): void {
  program
    .command('push')
    .description(
      "push the agent's work as a branch (uncommitted changes are committed first); --pr opens a pull request",
    )
    .argument('<conversation>', 'conversation id')
    .option(
      '--repo <dir>',
      "the repository's directory under /home/sandbox (when the environment clones several)",
    )
    .option('--branch <name>', 'the branch (default: paddock/<id>-<n>, or the one this sandbox pushed last)')
    .option('-m, --message <text>', "the commit message (default: the latest prompt's first line)")
    .option('--pr', 'open a pull request (GitHub) or merge request (GitLab) for the branch')
    .option('--title <text>', 'the pull request title (default: the conversation title)')
    .option('--base <branch>', "the pull request's target branch (default: the repository's default branch)")
    .allowExcessArguments(false)
    .action(
      async (
        id: string,
        opts: {
          repo?: string;
          branch?: string;
          message?: string;
          pr?: boolean;
          title?: string;
          base?: string;
        },
      ) => {
        const pullRequest =
          opts.pr || opts.title !== undefined || opts.base !== undefined
            ? {
                ...(opts.title !== undefined ? { title: opts.title } : {}),
                ...(opts.base !== undefined ? { base: opts.base } : {}),
              }
            : undefined;
        const body = {
          ...(opts.repo !== undefined ? { repo: opts.repo } : {}),
          ...(opts.branch !== undefined ? { branch: opts.branch } : {}),
          ...(opts.message !== undefined ? { message: opts.message } : {}),
          ...(pullRequest ? { pull_request: pullRequest } : {}),
        };
        const label = pullRequest
          ? 'committing, pushing and opening a pull request…'
          : 'committing and pushing…';
        const result = await withProgress(ctx.io, label, () =>
          ctx.client().request<PushResult>('POST', `${conversationPath(id)}/push`, body),
        );
        ctx.print(ctx.format() === 'json' ? json(result) : renderPush(result));
      },
    );
}
