// paddock diff <conversation> [--turn N] [--stat] [--repo DIR]: the agent's changes, as git
// prints them. Without --turn, the live sandbox's changes against each repository's base
// (GET /api/conversations/:id/changes, then one request per file's diff); with --turn N, what
// turn N changed as recorded after it (GET …/turns/:turn_id/changes), also after a reclaim.
// Colour like git's when stdout is a terminal and NO_COLOR is unset.
import type { Command } from 'commander';
import type { CommandContext } from './conversations.ts';
import { CliError } from './errors.ts';
import { json } from './output.ts';

interface ChangedFile {
  path: string;
  old_path: string | null;
  status: 'added' | 'modified' | 'deleted' | 'renamed' | 'type_changed';
  additions: number;
  deletions: number;
  binary: boolean;
  committed: boolean;
  patch?: string | null;
  patch_omitted?: 'binary' | 'too_large' | null;
}

interface Repository {
  dir: string;
  origin: 'cloned' | 'created';
  base: string;
  files: ChangedFile[];
  additions: number;
  deletions: number;
  truncated_files: number;
  missing: boolean;
}

const path = (id: string) => `/api/conversations/${encodeURIComponent(id)}`;

const paint = (on: boolean) => (code: string, text: string) => (on ? `\x1b[${code}m${text}\x1b[0m` : text);

/** `git diff --stat`: one line per file (repository-prefixed when there are several), then the total. */
export function renderStat(repos: Repository[], color: boolean): string {
  const c = paint(color);
  const several = repos.length > 1;
  const rows = repos.flatMap((r) =>
    r.files.map((f) => {
      const name = `${several ? `${r.dir}/` : ''}${f.old_path ? `${f.old_path} => ${f.path}` : f.path}`;
      return { name, f };
    }),
  );
  if (rows.length === 0) return 'no changes';
  const width = Math.max(...rows.map((r) => r.name.length));
  const most = Math.max(1, ...rows.map((r) => r.f.additions + r.f.deletions));
  const scale = Math.min(1, 50 / most);
  const lines = rows.map(({ name, f }) => {
    if (f.binary) return ` ${name.padEnd(width)} | Bin`;
    // Like git: a file with changes shows at least one sign of each kind it has.
    const plus = f.additions > 0 ? Math.max(1, Math.round(f.additions * scale)) : 0;
    const minus = f.deletions > 0 ? Math.max(1, Math.round(f.deletions * scale)) : 0;
    return ` ${name.padEnd(width)} | ${String(f.additions + f.deletions).padStart(5)} ${c('32', '+'.repeat(plus))}${c('31', '-'.repeat(minus))}`;
  });
  const additions = rows.reduce((n, r) => n + r.f.additions, 0);
  const deletions = rows.reduce((n, r) => n + r.f.deletions, 0);
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  lines.push(
    ` ${plural(rows.length, 'file')} changed, ${plural(additions, 'insertion')}(+), ${plural(deletions, 'deletion')}(-)`,
  );
  const cut = repos.reduce((n, r) => n + r.truncated_files, 0);
  if (cut > 0) lines.push(` (${cut} more files not listed)`);
  return lines.join('\n');
}

/** The patches, coloured like git's; an omitted one is named with the reason. */
export function renderPatches(repos: Repository[], color: boolean): string {
  const c = paint(color);
  const out: string[] = [];
  const several = repos.length > 1;
  for (const repo of repos) {
    if (several) out.push(c('1;33', `# ${repo.dir} (${repo.origin}, base ${repo.base.slice(0, 12)})`));
    for (const f of repo.files) {
      if (f.patch) {
        for (const line of f.patch.replace(/\n$/, '').split('\n')) {
          if (
            line.startsWith('diff --git ') ||
            line.startsWith('index ') ||
            line.startsWith('--- ') ||
            line.startsWith('+++ ')
          )
            out.push(c('1', line));
          else if (line.startsWith('@@')) out.push(c('36', line));
          else if (line.startsWith('+')) out.push(c('32', line));
          else if (line.startsWith('-')) out.push(c('31', line));
          else out.push(line);
        }
        continue;
      }
      out.push(c('1', `diff --git a/${f.old_path ?? f.path} b/${f.path}`));
      out.push(
        f.binary || f.patch_omitted === 'binary'
          ? 'Binary file, not shown'
          : `File too large to show inline (+${f.additions} -${f.deletions}): see it in the console or with the files API`,
      );
    }
  }
  return out.length === 0 ? 'no changes' : out.join('\n');
}

export function registerDiffCommand(program: Command, ctx: CommandContext): void {
  program
    .command('diff')
    .description("the agent's changes in the sandbox's repositories, or what one turn changed (--turn)")
    .argument('<conversation>', 'conversation id')
    .option('--turn <n>', 'what turn N changed (recorded after the turn: also once the sandbox is reclaimed)')
    .option('--stat', 'a diffstat instead of the patches')
    .option('--repo <dir>', 'only this repository (its directory under /home/sandbox)')
    .allowExcessArguments(false)
    .action(async (id: string, opts: { turn?: string; stat?: boolean; repo?: string }) => {
      const api = ctx.client();
      const color = ctx.io.outIsTty && !ctx.env['NO_COLOR'];
      let repos: Repository[];
      if (opts.turn !== undefined) {
        const seq = Number(opts.turn);
        if (!Number.isInteger(seq) || seq < 1)
          throw new CliError('--turn takes a turn number (1, 2, …)', [], 2);
        const { data } = await api.request<{ data: { id: string; seq: number }[] }>(
          'GET',
          `${path(id)}/turns`,
        );
        const turn = data.find((t) => t.seq === seq);
        if (!turn) throw new CliError(`conversation ${id} has no turn ${seq}`);
        const body = await api.request<{ status: string; error: string | null; repositories: Repository[] }>(
          'GET',
          `${path(id)}/turns/${encodeURIComponent(turn.id)}/changes`,
        );
        if (ctx.format() === 'json') return ctx.print(json(body));
        if (body.status === 'not_recorded') throw new CliError(`turn ${seq}'s changes were not recorded`);
        if (body.status === 'recording')
          throw new CliError(`turn ${seq} is still running: its changes are recorded when it ends`);
        if (body.status === 'failed')
          throw new CliError(`turn ${seq}'s changes could not be recorded: ${body.error ?? ''}`);
        repos = body.repositories;
      } else {
        const q = opts.repo ? `?repo=${encodeURIComponent(opts.repo)}` : '';
        const body = await api.request<{ repositories: Repository[] }>('GET', `${path(id)}/changes${q}`);
        repos = body.repositories;
        if (!opts.stat) {
          for (const repo of repos) {
            for (const [n, f] of repo.files.entries()) {
              if (f.binary) continue;
              const one = await api.request<{ file: ChangedFile }>(
                'GET',
                `${path(id)}/changes?${new URLSearchParams({ repo: repo.dir, file: f.path })}`,
              );
              repo.files[n] = one.file;
            }
          }
        }
        if (ctx.format() === 'json') return ctx.print(json({ repositories: repos }));
      }
      if (opts.repo !== undefined) repos = repos.filter((r) => r.dir === opts.repo);
      ctx.print(opts.stat ? renderStat(repos, color) : renderPatches(repos, color));
    });
}
