import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Config, ConfigError, decodeMasterKey, type Env, parseConfig } from './config.ts';

export interface LoadedConfig {
  config: Config;
  warnings: string[];
}

export const DEV_MASTER_KEY_FILE = 'master-secrets.key';

/**
 * Parses the environment, then (outside production only) fills in a development
 * MASTER_SECRETS_KEY generated once and kept in the data directory. Production never
 * reaches the file branch: parseConfig already refused a missing key.
 */
export function loadConfig(env: Env): LoadedConfig {
  const { config, warnings } = parseConfig(env);
  if (config.masterSecretsKey || config.isProduction) return { config, warnings };

  const dataDir = resolve(config.dataDir);
  const file = join(dataDir, DEV_MASTER_KEY_FILE);
  let encoded: string;
  try {
    encoded = readFileSync(file, 'utf8').trim();
  } catch {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    encoded = randomBytes(32).toString('base64url');
    writeFileSync(file, `${encoded}\n`, { mode: 0o600, flag: 'wx' });
  }
  const key = decodeMasterKey(encoded);
  if (!key) throw new ConfigError([`MASTER_SECRETS_KEY: the development key file ${file} is malformed`]);
  warnings.push(
    `MASTER_SECRETS_KEY is not set: using the DEVELOPMENT key kept in ${file}. ` +
      'Losing that file makes every stored secret unrecoverable. Production refuses to boot without MASTER_SECRETS_KEY.',
  );
  return { config: Object.freeze({ ...config, masterSecretsKey: key }), warnings };
}
