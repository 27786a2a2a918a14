// Password policy and hashing. Invariants (password.test.ts, accounts.http.test.ts):
// - Policy after OWASP ASVS v4 2.1: at least 8 and at most 256 characters (code points),
//   no composition rules, every printable Unicode character allowed, and a list of
//   ~18 000 common passwords (zxcvbn's frequency list, entries of 8+ characters) refused,
//   and so are the account's email address and its local part (case-insensitively).
// - Hashes are argon2id (node:crypto) with OWASP parameters m=19 MiB, t=2, p=1, a 16-byte
//   random salt, stored as a PHC string so parameters can be raised later; verification
//   reads the parameters from the stored string.
// - verifyPassword(null, ...) still runs one full argon2id computation against a fixed
//   dummy hash, so an unknown or OAuth-only account costs the same time as a wrong password.
import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';
import { dictionary } from '@zxcvbn-ts/language-common';

export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;

const COMMON = new Set(
  dictionary.passwords.filter((p) => p.length >= PASSWORD_MIN).map((p) => p.toLowerCase()),
);

/** Problems with a proposed password, empty when acceptable. */
export function passwordProblems(password: string, context: { email?: string } = {}): string[] {
  const length = [...password].length;
  if (length < PASSWORD_MIN) return [`must be at least ${PASSWORD_MIN} characters`];
  if (length > PASSWORD_MAX) return [`must be at most ${PASSWORD_MAX} characters`];
  const lower = password.toLowerCase();
  if (COMMON.has(lower)) return ['is too common; choose a less guessable password'];
  if (context.email) {
    const email = context.email.trim().toLowerCase();
    if (lower === email) return ['must not be your email address'];
    const at = email.lastIndexOf('@');
    if (at > 0 && lower === email.slice(0, at)) return ['must not be the name part of your email address'];
  }
  return [];
}

export interface Argon2Params {
  memory: number;
  passes: number;
  parallelism: number;
}

/** OWASP Password Storage Cheat Sheet, argon2id first option. */
export const ARGON2_PARAMS: Argon2Params = { memory: 19_456, passes: 2, parallelism: 1 };
const TAG_LENGTH = 32;

function argon2id(password: string, salt: Buffer, p: Argon2Params): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    argon2(
      'argon2id',
      {
        message: Buffer.from(password.normalize('NFC'), 'utf8'),
        nonce: salt,
        memory: p.memory,
        passes: p.passes,
        parallelism: p.parallelism,
        tagLength: TAG_LENGTH,
      },
      (err, key) => (err ? reject(err) : resolve(key)),
    );
  });
}

export async function hashPassword(password: string, params: Argon2Params = ARGON2_PARAMS): Promise<string> {
  const salt = randomBytes(16);
  const tag = await argon2id(password, salt, params);
  const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');
  return `$argon2id$v=19$m=${params.memory},t=${params.passes},p=${params.parallelism}$${b64(salt)}$${b64(tag)}`;
}

const PHC = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

// A real hash of a random password nobody knows, with today's parameters.
let dummyHash: Promise<string> | undefined;
function getDummyHash(): Promise<string> {
  dummyHash ??= hashPassword(randomBytes(32).toString('base64url'));
  return dummyHash;
}

/** Counts dummy verifications; read by tests to prove the unknown-user path does the work. */
export const passwordStats = { dummyVerifications: 0 };

/**
 * True when `password` matches `stored`. A null `stored` (unknown user, OAuth-only
 * account) verifies against the dummy hash and returns false.
 */
export async function verifyPassword(stored: string | null, password: string): Promise<boolean> {
  const useDummy = stored === null || !PHC.test(stored);
  const hash = useDummy ? await getDummyHash() : stored;
  if (useDummy) passwordStats.dummyVerifications += 1;
  const m = PHC.exec(hash);
  if (!m) return false;
  const salt = Buffer.from(m[4]!, 'base64');
  const expected = Buffer.from(m[5]!, 'base64');
  const params = { memory: Number(m[1]), passes: Number(m[2]), parallelism: Number(m[3]) };
  const actual = await argon2id(password, salt, params);
  const ok = actual.length === expected.length && timingSafeEqual(actual, expected);
  return ok && !useDummy;
}

/** Warms the dummy hash so the first failed login is not slower than the rest. */
export async function warmPasswordHashing(): Promise<void> {
  await getDummyHash();
}
