// The models each runtime runs, for the agent form: suggestions for its model picker (free text
// stays allowed), the placeholder, and the server's refusal of a model the runtime cannot run
// (apps/server/src/agents/agents.models.ts, docs/agents.md "Models a runtime runs"), checked
// here too so that the form says it before a round trip. The server's check is the one that holds.
export const RUNTIMES = ['claude', 'codex', 'gemini', 'opencode'] as const;
export type Runtime = (typeof RUNTIMES)[number];

const ANTHROPIC = ['anthropic/claude-sonnet-4-5', 'anthropic/claude-opus-4-1', 'anthropic/claude-haiku-4-5'];
const OPENAI = ['openai/gpt-5.5', 'openai/gpt-5', 'openai/gpt-5-codex', 'openai/gpt-5-mini'];
const GEMINI = ['google/gemini-2.5-pro', 'google/gemini-2.5-flash'];

/** Suggested models per runtime, the first being the placeholder. */
export const MODEL_SUGGESTIONS: Readonly<Record<Runtime, readonly string[]>> = {
  claude: ANTHROPIC,
  codex: OPENAI,
  gemini: GEMINI,
  opencode: [...ANTHROPIC, ...OPENAI, ...GEMINI],
};

/** What the model field's hint says the runtime takes. */
export const MODEL_HINT: Readonly<Record<Runtime, string>> = {
  claude: 'anthropic/<model_id>: Claude Code runs Anthropic models',
  codex: 'openai/<model_id>: Codex runs OpenAI models',
  gemini: 'google/<model_id>: Gemini CLI runs Gemini models',
  opencode: 'anthropic/…, openai/… or google/…: opencode runs models of those providers',
};

type Family = 'anthropic' | 'openai' | 'gemini';

const FAMILIES: ReadonlyMap<string, Family> = new Map([
  ['anthropic', 'anthropic'],
  ['openai', 'openai'],
  ['google', 'gemini'],
  ['gemini', 'gemini'],
]);
const LABEL: Readonly<Record<Family, string>> = {
  anthropic: 'an Anthropic',
  openai: 'an OpenAI',
  gemini: 'a Gemini',
};
const RUNTIMES_OF: Readonly<Record<Family, string>> = {
  anthropic: 'claude or opencode',
  openai: 'codex or opencode',
  gemini: 'gemini or opencode',
};
const OWN: Readonly<Record<Exclude<Runtime, 'opencode'>, { family: Family; form: string }>> = {
  claude: { family: 'anthropic', form: 'Anthropic models (anthropic/<model_id>)' },
  codex: { family: 'openai', form: 'OpenAI models (openai/<model_id>)' },
  gemini: { family: 'gemini', form: 'Gemini models (google/<model_id> or gemini/<model_id>)' },
};

/**
 * Why `runtime` cannot run `model`, in the server's words, or null when it may (or when the
 * model has no provider part yet: the server's form check says that on save).
 */
export function modelMismatch(runtime: Runtime, model: string): string | null {
  const slash = model.indexOf('/');
  if (slash <= 0) return null;
  const provider = model.slice(0, slash);
  const family = FAMILIES.get(provider);
  if (runtime === 'opencode') {
    if (family) return null;
    return `opencode runs models of anthropic, openai or google (anthropic/…, openai/…, google/… or gemini/…), not of "${provider}"`;
  }
  const own = OWN[runtime];
  if (!family || family === own.family) return null;
  return `${runtime} runs ${own.form}; ${model} is ${LABEL[family]} model: choose ${LABEL[own.family]} model, or the ${RUNTIMES_OF[family]} runtime`;
}
