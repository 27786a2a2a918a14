// Gemini CLI, headless (shared/design/agent-clis.md): `gemini -p <prompt> --output-format
// stream-json -m <model> [--resume <id>]` with GEMINI_CLI_TRUST_WORKSPACE and
// GEMINI_CLI_NO_RELAUNCH. Images are referenced as `@path` in the prompt. The session id comes
// from the `init` line, usage from `result.stats`.
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

export const geminiAdapter: RuntimeAdapter = {
  runtime: 'gemini',
  sessionPaths: [`${HOME}/.gemini/tmp`],
  skillsDir: `${HOME}/.gemini/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, turnId }) {
    const paths = turnFiles(turnId, '', images).imagePaths;
    const text = paths.length === 0 ? prompt : `${prompt}\n\n${paths.map((p) => `@${p}`).join(' ')}`;
    const files = turnFiles(turnId, text, images);
    const flags = ['--output-format', 'stream-json', '-m', modelId(agent.model)];
    if (resumeSessionId) flags.push('--resume', resumeSessionId);
    return {
      argv: shellArgv('gemini', ['gemini', '-p'], files.promptPath, flags),
      env: { GEMINI_CLI_TRUST_WORKSPACE: 'true', GEMINI_CLI_NO_RELAUNCH: 'true' },
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
  if (event['type'] === 'init' && typeof event['session_id'] === 'string')
    return { sessionId: event['session_id'] };
  if (event['type'] !== 'result') return null;
  const stats = (event['stats'] ?? {}) as Record<string, unknown>;
  const reported = defined({
    input_tokens: num(stats['input_tokens']),
    output_tokens: num(stats['output_tokens']),
  });
  return reported ? { usage: reported } : null;
}
