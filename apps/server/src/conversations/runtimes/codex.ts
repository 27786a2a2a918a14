// Codex, headless (shared/design/agent-clis.md): `codex exec --json --skip-git-repo-check
// --dangerously-bypass-approvals-and-sandbox [-m model] [-i image…] <prompt>`, resumed with
// `codex exec … resume <thread_id> <prompt>`. The thread id comes from `thread.started`,
// usage from `turn.completed` (Codex reports it per thread, cumulative across resumed turns).
import type { RuntimeAdapter } from '../contracts.ts';
import { pinnedCli } from '../runtime-probe.ts';
import {
  defined,
  HOME,
  jsonLine,
  modelId,
  num,
  type Summary,
  shellArgv,
  toEvents,
  turnFiles,
  WORKDIR,
} from './common.ts';

export const codexAdapter: RuntimeAdapter = {
  runtime: 'codex',
  cli: pinnedCli('codex'),
  sessionPaths: [`${HOME}/.codex/sessions`],
  skillsDir: `${HOME}/.codex/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, turnId }) {
    const files = turnFiles(turnId, prompt, images);
    const before = [
      'codex',
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--dangerously-bypass-approvals-and-sandbox',
      '-m',
      modelId(agent.model),
      ...files.imagePaths.flatMap((p) => ['-i', p]),
      ...(resumeSessionId ? ['resume', resumeSessionId] : []),
    ];
    return {
      argv: shellArgv('codex', before, files.promptPath, []),
      env: { CODEX_HOME: `${HOME}/.codex` },
      cwd: WORKDIR,
      files: files.files,
    };
  },
  parseLine(line) {
    return toEvents(summary(line));
  },
};

/** The session id and usage of one line (issue 10 reads the whole dialect). */
function summary(line: string): Summary {
  const event = jsonLine(line);
  if (!event) return null;
  if (event['type'] === 'thread.started' && typeof event['thread_id'] === 'string')
    return { sessionId: event['thread_id'] };
  if (event['type'] !== 'turn.completed') return null;
  const usage = (event['usage'] ?? {}) as Record<string, unknown>;
  const reported = defined({
    input_tokens: num(usage['input_tokens']),
    output_tokens: num(usage['output_tokens']),
    cache_read_tokens: num(usage['cached_input_tokens']),
  });
  return reported ? { usage: reported } : null;
}
