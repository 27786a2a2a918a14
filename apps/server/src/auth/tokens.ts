import { createHash, randomBytes } from 'node:crypto';

/** A random 256-bit bearer secret (session cookie, email link token), URL-safe. */
export function generateSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** Only the SHA-256 of a bearer secret is stored; lookups go by this hash. */
export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}
