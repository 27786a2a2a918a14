import { createHash, randomBytes } from 'node:crypto';

/** API keys are `pdk_` + 256 random bits. Only the SHA-256 of a key is stored. */
export const API_KEY_PREFIX = 'pdk_';

export function generateApiKey(): { key: string; prefix: string; hash: Buffer } {
  const key = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { key, prefix: key.slice(0, 12), hash: hashApiKey(key) };
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}
