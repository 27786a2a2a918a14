// Test data factories: real rows through the real tables.
import { randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { generateApiKey } from '../../src/auth/api-key.ts';
import type { Db } from '../../src/db/database.ts';

export interface TestUser {
  id: string;
  email: string;
  apiKey: string;
  apiKeyId: string;
  /** Headers carrying the user's API key. */
  auth: { authorization: string };
}

/** A verified user with one full-scope API key. */
export async function createVerifiedUser(
  db: Db,
  options: { email?: string; isAdmin?: boolean } = {},
): Promise<TestUser> {
  const id = uuidv7();
  const email = options.email ?? `user-${randomBytes(4).toString('hex')}@example.com`;
  await db
    .insertInto('users')
    .values({
      id,
      email,
      password_hash: null,
      email_verified_at: new Date(),
      is_admin: options.isAdmin ?? false,
    })
    .execute();
  const { key, prefix, hash } = generateApiKey();
  const apiKeyId = uuidv7();
  await db
    .insertInto('api_keys')
    .values({ id: apiKeyId, user_id: id, name: 'test', prefix, key_hash: hash })
    .execute();
  return { id, email, apiKey: key, apiKeyId, auth: { authorization: `Bearer ${key}` } };
}
