// The env a sandbox receives (spec: Secrets model, spawn time).
//
// Invariants:
// - Layers, later wins on a key collision: the account's inference credentials
//   (ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL, OPENAI_*, GEMINI_API_KEY/GOOGLE_GEMINI_BASE_URL),
//   environment env_vars, environment secrets, vault secrets, then the service's own variables
//   (PADDOCK_*/SERVICE_*), which a tenant cannot shadow.
// - A provider's account credential is one unit: when a later layer sets that provider's key
//   variable, the account's base URL for it is left out too, so a key from an environment or a
//   vault is never sent to a gateway configured for the account's own key.
//   (A later layer that sets only the base URL overrides just that variable.)
// - Every decrypted secret value, every account inference key (also one a later layer
//   overrides) and the callback key are registered with the conversation's SecretRegistry
//   before this module returns anything, so no caller can write or log a value that is not yet
//   redactable. So are the secret values of the conversation's ancestors (a sub-conversation's
//   log hides what its parents' hide), which the sandbox is not given. env_vars are not registered: they are not secret (the API returns
//   them as written), and redacting a value like "production" would mangle every log line.
// - `${VAR}` in the agent's MCP config resolves against the merged map; a missing variable fails
//   with the variable names only, never a value.
// - The env file quotes every value with POSIX single quotes: inside them no character is special
//   (no $, backtick, backslash or newline expansion), and a ' is written as '\''. Sourcing the file
//   can therefore only assign; no value can execute (env-file.test.ts sources it in a real sandbox).
import type { McpServer } from '../../agents/agents.tables.ts';
import type { Db } from '../../db/database.ts';
import type { SandboxCredential } from '../../inference-credentials/inference-credentials.service.ts';
import { PROVIDER_SPECS } from '../../inference-credentials/providers.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import { substitute } from '../../secrets/substitution.ts';
import { ProvisionError } from '../contracts.ts';
import type { SecretRegistry } from '../log/redactor.ts';
import { lineageSecretValues } from './lineage-secrets.ts';

/** Where the env file lives in the sandbox (mode 600, owned by the sandbox user). */
export const ENV_FILE_PATH = '/home/sandbox/.paddock/env';

export interface EnvLayers {
  tenantId: string;
  conversationId: string;
  envVars: Record<string, string>;
  environmentId: string | null;
  vaultId: string | null;
  /** The owner's inference credentials, decrypted (inference-credentials.service.ts forSandbox). */
  inferenceCredentials: SandboxCredential[];
  mcpServers: Record<string, McpServer>;
  callback: { key: string; baseUrl: string };
}

/**
 * The most environment a sandbox is given (KEY=value bytes): Linux starts a process with at most about
 * 2 MiB of argv and environment together (E2BIG beyond), and a turn's runtime adds its own variables and
 * arguments. Beyond it provisioning fails with the sizes, before any process could fail obscurely.
 */
export const ENV_MAX_BYTES = 1024 * 1024;

function envBytes(env: Record<string, string>): number {
  let bytes = 0;
  for (const [key, value] of Object.entries(env))
    bytes += Buffer.byteLength(key) + Buffer.byteLength(value) + 2;
  return bytes;
}

export interface AssembledEnv {
  env: Record<string, string>;
  mcpServers: Record<string, McpServer>;
  /** Only the tenant's secret values (inference keys + secrets), for callers that must not see the service's keys. */
  secretValues: string[];
}

/**
 * Decrypts, merges, registers and substitutes. Throws ProvisionError('provision', …) on a missing
 * `${VAR}` and on an env over ENV_MAX_BYTES.
 */
export async function assembleEnv(
  deps: { db: Db; secrets: Pick<SecretsService, 'decryptOwner'> },
  layers: EnvLayers,
  registry: SecretRegistry,
): Promise<AssembledEnv> {
  const environmentSecrets = layers.environmentId
    ? await deps.secrets.decryptOwner(
        layers.tenantId,
        { kind: 'environment', id: layers.environmentId },
        deps.db,
      )
    : {};
  const vaultSecrets = layers.vaultId
    ? await deps.secrets.decryptOwner(layers.tenantId, { kind: 'vault', id: layers.vaultId }, deps.db)
    : {};
  const secretValues = [
    ...layers.inferenceCredentials.map((c) => c.apiKey),
    ...Object.values(environmentSecrets),
    ...Object.values(vaultSecrets),
  ];
  // A sub-conversation's log hides what its parents' logs hide (lineage-secrets.ts); the values
  // are registered only, never given to this sandbox.
  const lineage = await lineageSecretValues(deps, layers.tenantId, layers.conversationId, { self: false });
  // Before anything else can see a value.
  registry.registerAll([...secretValues, ...lineage, layers.callback.key]);

  const tenantEnv = { ...layers.envVars, ...environmentSecrets, ...vaultSecrets };
  const credentialEnv: Record<string, string> = {};
  for (const credential of layers.inferenceCredentials) {
    const spec = PROVIDER_SPECS[credential.provider];
    if (Object.hasOwn(tenantEnv, spec.keyVar)) continue;
    credentialEnv[spec.keyVar] = credential.apiKey;
    if (credential.baseUrl !== null) credentialEnv[spec.baseUrlVar] = credential.baseUrl;
  }
  const env: Record<string, string> = {
    ...credentialEnv,
    ...tenantEnv,
    PADDOCK_TOKEN: layers.callback.key,
    SERVICE_TOKEN: layers.callback.key,
    PADDOCK_BASE_URL: layers.callback.baseUrl,
    SERVICE_BASE_URL: layers.callback.baseUrl,
    PADDOCK_CONVERSATION_ID: layers.conversationId,
  };
  const bytes = envBytes(env);
  if (bytes > ENV_MAX_BYTES) {
    throw new ProvisionError(
      'provision',
      `the environment's variables and secrets (with the vault's) take ${Math.ceil(bytes / 1024)} KiB together; a sandbox process can be given at most ${ENV_MAX_BYTES / 1024} KiB of environment: shorten or remove some`,
    );
  }
  const resolved = substitute(layers.mcpServers, env);
  if (!resolved.ok) {
    throw new ProvisionError(
      'provision',
      `the agent's MCP config names undefined variable(s): ${resolved.missing.join(', ')} (add them as environment or vault secrets)`,
    );
  }
  return { env, mcpServers: resolved.value, secretValues };
}

const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A POSIX single-quoted word: nothing inside is special to the shell. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The env file body: `export KEY='value'` per line, keys sorted, names checked. */
export function renderEnvFile(env: Record<string, string>): string {
  const lines: string[] = [
    '# Written by Paddock when the sandbox is provisioned, re-joined, or given changed inference',
    '# credentials. Values are single-quoted: sourcing this file only assigns variables.',
  ];
  for (const key of Object.keys(env).sort()) {
    // Names come from validated resources; a bad one here would be a bug, never written.
    if (!ENV_NAME_RE.test(key)) throw new Error(`env file: invalid variable name ${JSON.stringify(key)}`);
    if (env[key]?.includes('\0')) throw new Error(`env file: ${key} contains a NUL byte`);
    lines.push(`export ${key}=${shellQuote(env[key] ?? '')}`);
  }
  return `${lines.join('\n')}\n`;
}
