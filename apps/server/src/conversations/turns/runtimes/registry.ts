// The runtime adapters by runtime name: one file per runtime (issue 10 completes them against
// the real CLIs). Tests swap the whole registry for a scripted one (test/helpers/conversations.ts).
import type { Runtime } from '../../../agents/agents.tables.ts';
import type { RuntimeAdapter, RuntimeRegistry } from '../../contracts.ts';
import { claudeAdapter } from './claude.ts';
import { codexAdapter } from './codex.ts';
import { geminiAdapter } from './gemini.ts';
import { opencodeAdapter } from './opencode.ts';

const ADAPTERS: Record<Runtime, RuntimeAdapter> = {
  claude: claudeAdapter,
  codex: codexAdapter,
  gemini: geminiAdapter,
  opencode: opencodeAdapter,
};

export const defaultRuntimes: RuntimeRegistry = (runtime) => ADAPTERS[runtime];
