// The inference providers an account can hold a credential for, the sandbox variables each
// runtime reads them from (briefs: agents-common), and which provider an agent talks to.
// Pure data and functions; no I/O.
import type { Runtime } from '../agents/agents.tables.ts';

export const INFERENCE_PROVIDERS = ['anthropic', 'openai', 'gemini'] as const;
export type InferenceProvider = (typeof INFERENCE_PROVIDERS)[number];

export interface ProviderSpec {
  /** The variable the runtimes read the key from. */
  keyVar: string;
  /** The variable the runtimes read a gateway's base URL from. */
  baseUrlVar: string;
  /** The API host used when no base URL is set. */
  defaultHost: string;
}

export const PROVIDER_SPECS: Readonly<Record<InferenceProvider, ProviderSpec>> = {
  anthropic: {
    keyVar: 'ANTHROPIC_API_KEY',
    baseUrlVar: 'ANTHROPIC_BASE_URL',
    defaultHost: 'api.anthropic.com',
  },
  openai: { keyVar: 'OPENAI_API_KEY', baseUrlVar: 'OPENAI_BASE_URL', defaultHost: 'api.openai.com' },
  gemini: {
    keyVar: 'GEMINI_API_KEY',
    baseUrlVar: 'GOOGLE_GEMINI_BASE_URL',
    defaultHost: 'generativelanguage.googleapis.com',
  },
};

export function isInferenceProvider(value: string): value is InferenceProvider {
  return (INFERENCE_PROVIDERS as readonly string[]).includes(value);
}

/**
 * The provider an agent's runtime talks to: claude → anthropic, codex → openai, gemini →
 * gemini; opencode → the provider part of the agent's model (`<provider>/<model_id>`:
 * anthropic, openai, google or gemini). Null when it cannot be told (an opencode model of
 * another provider).
 */
export function runtimeProvider(runtime: Runtime, model: string): InferenceProvider | null {
  switch (runtime) {
    case 'claude':
      return 'anthropic';
    case 'codex':
      return 'openai';
    case 'gemini':
      return 'gemini';
    case 'opencode': {
      const prefix = model.split('/', 1)[0]?.toLowerCase() ?? '';
      if (prefix === 'anthropic') return 'anthropic';
      if (prefix === 'openai') return 'openai';
      if (prefix === 'google' || prefix === 'gemini') return 'gemini';
      return null;
    }
  }
}

/**
 * The host the sandbox reaches a provider at, given the env it runs with: the host of the
 * base URL variable when it holds a URL with a host name, else the provider's default host.
 * Null when the base URL names an IP address or is not a URL (the egress proxy allows host
 * names only, and a policy rule must be a host name pattern).
 */
export function providerHost(
  provider: InferenceProvider,
  env: Readonly<Record<string, string>>,
): string | null {
  const spec = PROVIDER_SPECS[provider];
  const raw = env[spec.baseUrlVar];
  if (raw === undefined || raw.trim() === '') return spec.defaultHost;
  let host: string;
  try {
    host = new URL(raw).hostname.toLowerCase().replace(/\.$/, '');
  } catch {
    return null;
  }
  if (!HOST_NAME_RE.test(host)) return null;
  return host;
}

/** A host name of at least two labels (what a policy rule and allowed_hosts accept); no IP literal. */
const HOST_NAME_RE =
  /^(?=.{1,253}$)(?!\d+\.\d+\.\d+\.\d+$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/;
