// Mounting an agent's skills into its sandbox (part of the `provision` stage).
//
// - inline `{name, content}` → `${adapter.skillsDir}/<name>/SKILL.md` (name: [a-z0-9-], schema);
// - source `{source: 'owner/repo', ref}` → a clone of https://github.com/<owner>/<repo> at `ref`
//   into `${adapter.skillsDir}/<repo>`, with the same clone code as the environment's repos.
import type { SandboxClient } from '@paddock/sandbox-client';
import type { Skill } from '../../agents/agents.tables.ts';
import { type LogWriter, ProvisionError } from '../contracts.ts';
import { cloneRepo } from './repos.ts';

export const GITHUB_BASE_URL = 'https://github.com';

export async function mountSkills(
  sandbox: SandboxClient,
  name: string,
  input: {
    skills: Skill[];
    skillsDir: string;
    writer: Pick<LogWriter, 'output'> | null;
    /** Where `owner/repo` sources are cloned from (GitHub; a test points it at its own server). */
    sourceBaseUrl?: string;
    gitEnv?: Record<string, string>;
    signal?: AbortSignal;
  },
): Promise<void> {
  const dir = input.skillsDir.replace(/\/$/, '');
  for (const skill of input.skills) {
    if (skill.source !== undefined) {
      const [owner, repo] = skill.source.split('/');
      if (!owner || !repo)
        throw new ProvisionError('provision', `skill source ${skill.source} is not owner/repo`);
      await cloneRepo(
        sandbox,
        name,
        {
          url: `${(input.sourceBaseUrl ?? GITHUB_BASE_URL).replace(/\/$/, '')}/${owner}/${repo}`,
          ref: skill.ref,
          dir: `${dir}/${repo.replace(/\.git$/, '')}`,
        },
        {
          stage: 'provision',
          writer: input.writer,
          ...(input.gitEnv ? { env: input.gitEnv } : {}),
          ...(input.signal ? { signal: input.signal } : {}),
        },
      );
    } else if (skill.name !== undefined && skill.content !== undefined) {
      await sandbox.writeFile(name, `${dir}/${skill.name}/SKILL.md`, skill.content, {
        mode: 0o644,
        mkdirParents: true,
        retry: true,
      });
    }
  }
}
