// opencode, headless (shared/design/agent-clis.md): `opencode run --format json [-m model]
// [--session <id>] [-f image…] <prompt>` with models fetch and auto-update off and its own
// XDG dirs under the sandbox home. The session id comes from any event's `sessionID`, usage
// from `step_finish` parts.
import type { RuntimeAdapter } from '../contracts.ts';
import { pinnedCli } from '../runtime-probe.ts';
import {
  defined,
  HOME,
  jsonLine,
  num,
  type Summary,
  shellArgv,
  toEvents,
  turnFiles,
  WORKDIR,
} from './common.ts';

export const opencodeAdapter: RuntimeAdapter = {
  runtime: 'opencode',
  cli: pinnedCli('opencode'),
  sessionPaths: [`${HOME}/.local/share/opencode`],
  skillsDir: `${HOME}/.config/opencode/skills`,
  buildTurn({ agent, prompt, images, resumeSessionId, turnId }) {
    const files = turnFiles(turnId, prompt, images);
    const before = [
      'opencode',
      'run',
      '--format',
      'json',
      '-m',
      agent.model,
      ...(resumeSessionId ? ['--session', resumeSessionId] : []),
      ...files.imagePaths.flatMap((p) => ['-f', p]),
    ];
    return {
      argv: shellArgv('opencode', before, files.promptPath, []),
      env: {
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        XDG_CONFIG_HOME: `${HOME}/.config`,
        XDG_DATA_HOME: `${HOME}/.local/share`,
        XDG_CACHE_HOME: `${HOME}/.cache`,
      },
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
  const sessionId = typeof event['sessionID'] === 'string' ? event['sessionID'] : undefined;
  const part = (event['part'] ?? {}) as Record<string, unknown>;
  if (event['type'] !== 'step_finish') return sessionId ? { sessionId } : null;
  const tokens = (part['tokens'] ?? {}) as Record<string, unknown>;
  const cache = (tokens['cache'] ?? {}) as Record<string, unknown>;
  const reported = defined({
    input_tokens: num(tokens['input']),
    output_tokens: num(tokens['output']),
    cache_read_tokens: num(cache['read']),
    cost_usd: num(part['cost']),
  });
  return { ...(sessionId ? { sessionId } : {}), ...(reported ? { usage: reported } : {}) };
}
