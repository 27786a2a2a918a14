// Claude Code, headless (shared/design/agent-clis.md): `claude -p <prompt> --output-format
// stream-json --verbose --dangerously-skip-permissions [--resume <id>]`, IS_SANDBOX=1 so the
// skip flag is accepted as root. Images are referenced by path in the prompt (read by its
// Read tool). The session id comes from the `system/init` and `result` lines, usage from `result`.
import type { RuntimeAdapter } from '../contracts.ts';
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

export const claudeAdapter: RuntimeAdapter = {
  runtime: 'claude',
  sessionPaths: [`${HOME}/.claude`],
  skillsDir: `${HOME}/.claude/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, turnId }) {
    const withImages =
      images.length === 0
        ? prompt
        : `${prompt}\n\nAttached images:\n${turnFiles(turnId, '', images).imagePaths.join('\n')}`;
    const files = turnFiles(turnId, withImages, images);
    const flags = ['--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions'];
    flags.push('--model', modelId(agent.model));
    if (agent.system) flags.push('--append-system-prompt', agent.system);
    if (resumeSessionId) flags.push('--resume', resumeSessionId);
    return {
      argv: shellArgv('claude', ['claude', '-p'], files.promptPath, flags),
      env: { IS_SANDBOX: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' },
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
  const sessionId = typeof event['session_id'] === 'string' ? event['session_id'] : undefined;
  if (event['type'] !== 'result') return sessionId ? { sessionId } : null;
  const usage = (event['usage'] ?? {}) as Record<string, unknown>;
  const reported = defined({
    input_tokens: num(usage['input_tokens']),
    output_tokens: num(usage['output_tokens']),
    cache_read_tokens: num(usage['cache_read_input_tokens']),
    cost_usd: num(event['total_cost_usd']),
  });
  return { ...(sessionId ? { sessionId } : {}), ...(reported ? { usage: reported } : {}) };
}
