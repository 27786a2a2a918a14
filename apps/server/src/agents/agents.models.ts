// Which models a runtime can run (docs/agents.md, "Models a runtime runs"). An agent's model is
// `<provider>/<model_id>`. Claude Code talks to Anthropic, Codex to OpenAI, Gemini CLI to Gemini,
// each with the key and base URL of that provider; opencode enables the one provider its model
// names, among anthropic, openai and google (or gemini). Refused is only what certainly fails:
// - claude, codex, gemini: a model whose provider is another one of those three (the CLI would
//   send that provider's model id to its own provider). Any other provider part passes, since a
//   gateway behind the runtime's base URL may serve it under that name.
// - opencode: a provider outside the four names, which its turn refuses at once
//   (turns/runtimes/opencode.ts).
// Checked on writes only (create, update, bulk apply): an agent stored before the rule still
// lists, loads and runs as it did.
import type { Runtime } from './agents.tables.ts';

type Family = 'anthropic' | 'openai' | 'gemini';

/** A model's provider part → the family of the inference provider it names (a Map: no prototype keys). */
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

/** The runtimes that run a family's models: what to use instead. */
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

/** Why `runtime` cannot run `model` (a `<provider>/<model_id>`), or null when it may. */
export function modelMismatch(runtime: Runtime, model: string): string | null {
  const provider = model.slice(0, Math.max(0, model.indexOf('/')));
  const family = FAMILIES.get(provider);
  if (runtime === 'opencode') {
    if (family) return null;
    return `opencode runs models of anthropic, openai or google (anthropic/…, openai/…, google/… or gemini/…), not of "${provider}"`;
  }
  const own = OWN[runtime];
  if (!family || family === own.family) return null;
  return `${runtime} runs ${own.form}; ${model} is ${LABEL[family]} model: choose ${LABEL[own.family]} model, or the ${RUNTIMES_OF[family]} runtime`;
}
