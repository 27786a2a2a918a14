// Request and response shapes of /api/account/inference-credentials. The API key is
// write-only: no response schema has a field for it, and no validation message quotes it.
import { isIP } from 'node:net';
import { z } from 'zod';
import { Model, Runtime } from '../agents/agents.schema.ts';
import { INFERENCE_PROVIDERS } from './providers.ts';

export const API_KEY_MIN = 8;
export const API_KEY_MAX = 4096;
export const BASE_URL_MAX = 2048;

/** As providers issue them: printable ASCII, no spaces (the key goes into an HTTP header). */
const API_KEY_RE = /^[\x21-\x7e]+$/;

export const ApiKey = z.string().superRefine((key, ctx) => {
  // Messages name the rule, never the value.
  if (key.length < API_KEY_MIN)
    ctx.addIssue({ code: 'custom', message: `must be at least ${API_KEY_MIN} characters` });
  else if (key.length > API_KEY_MAX)
    ctx.addIssue({ code: 'custom', message: `must be at most ${API_KEY_MAX} characters` });
  else if (!API_KEY_RE.test(key))
    ctx.addIssue({
      code: 'custom',
      message: 'must be printable ASCII without spaces or line breaks, as the provider issued it',
    });
});

/**
 * Hosts plain http may go to: loopback, private and link-local addresses, `localhost`,
 * single-label names, and names under .localhost/.internal/.local/.lan/.home.arpa/.test (names
 * the public internet cannot have). A key sent over http crosses the network in clear text;
 * that is only acceptable on the user's own network. Not a security boundary (the sandbox runs
 * the user's own code): a guard against sending a key in clear text by mistake.
 */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const family = isIP(host);
  if (family === 4) {
    const [a = 0, b = 0] = host.split('.').map(Number);
    return (
      a === 127 ||
      a === 10 ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 169 && b === 254)
    );
  }
  if (family === 6) return host === '::1' || /^f[cd]/.test(host) || /^fe[89ab]/.test(host);
  if (host === 'localhost' || !host.includes('.')) return true;
  return ['.localhost', '.internal', '.local', '.lan', '.home.arpa', '.test'].some((suffix) =>
    host.endsWith(suffix),
  );
}

/** Why a base URL is refused, or null. */
export function baseUrlProblem(raw: string): string | null {
  if (raw.length > BASE_URL_MAX) return `must be at most ${BASE_URL_MAX} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute URL such as https://gateway.example.com/anthropic';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https:// URL';
  if (url.hostname === '') return 'must name a host';
  if (url.protocol === 'http:' && !isPrivateHost(url.hostname))
    return 'must be https:// (plain http is accepted only for loopback and private-network hosts)';
  // The base URL is returned by the API and is not redacted: no credential may hide in it.
  if (url.username !== '' || url.password !== '')
    return 'must not contain a user name or password (put the key in api_key)';
  if (url.search !== '' || url.hash !== '') return 'must not have a query string or fragment';
  return null;
}

export const BaseUrl = z.string().superRefine((raw, ctx) => {
  const problem = baseUrlProblem(raw);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const InferenceCredentialBody = z
  .object({
    api_key: ApiKey.describe('the provider API key; write-only, never returned'),
    base_url: BaseUrl.nullable()
      .optional()
      .describe(
        'optional gateway base URL (https; http only to a loopback or private-network host); refused when no sandbox can reach it (loopback, or a private address the operator has not declared)',
      ),
  })
  .strict();

export type InferenceCredentialInput = z.infer<typeof InferenceCredentialBody>;

/** Any string: an unknown provider is simply not found (404), like a malformed id. */
export const ProviderParams = z.object({ provider: z.string().max(100) });

export const InferenceCredentialView = z.object({
  provider: z.enum(INFERENCE_PROVIDERS),
  set: z.boolean().describe('whether a key is stored (the key itself is never returned)'),
  base_url: z.string().nullable(),
  updated_at: z.string().nullable().describe('RFC 3339 UTC; null when not set'),
});

export type InferenceCredentialViewT = z.infer<typeof InferenceCredentialView>;

export const AgentCredentialQuery = z.object({
  vault_id: z.uuid().optional().describe('the vault the conversation would start with'),
});

export const CredentialCheckQuery = z.object({
  runtime: Runtime,
  model: Model,
  environment_id: z.uuid().optional().describe("the agent's environment"),
  vault_id: z.uuid().optional().describe('the vault a conversation would start with'),
});

export const AgentCredentialView = z.object({
  provider: z
    .enum(INFERENCE_PROVIDERS)
    .nullable()
    .describe("the agent's provider; null when its model names another one (opencode)"),
  key_var: z.string().nullable().describe('the variable the runtime reads the key from'),
  source: z
    .enum(['account', 'environment', 'vault'])
    .nullable()
    .describe('where the key comes from; null: nowhere, the turns fail at once'),
});
