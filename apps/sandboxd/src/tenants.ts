/**
 * Tenants: each bearer token is its own namespace of sandbox names and checkpoints, stored under
 * <data>/tenants/<tenant id>/.
 *
 * Invariants (proved by test/security.host.test.ts):
 * - The tenant id is a keyed hash of the token: HMAC-SHA256 with a secret of this daemon (<data>/tenant.key,
 *   32 random bytes, mode 600, created on first start), never the bare token hash. Knowing a tenant id (a
 *   host-side directory name) does not help guess the token offline.
 * - Data dirs of earlier versions (tenants named by the unsalted SHA-256 of the token) keep working: at
 *   start the directory of every configured token is renamed to its keyed name. Directories of tokens no
 *   longer configured are left as they are (unreachable, as before).
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from './log.ts';

const KEY_FILE = 'tenant.key';

/** Reads the daemon's tenant key, creating it (mode 600) on first start. */
export function loadTenantKey(dataDir: string): Buffer {
  const file = path.join(dataDir, KEY_FILE);
  try {
    const key = readFileSync(file);
    if (key.length >= 32) {
      chmodSync(file, 0o600);
      return key;
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const key = randomBytes(32);
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, key);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  return key;
}

export type TenantOf = (token: string) => string;

export function tenantHasher(key: Buffer): TenantOf {
  return (token) => createHmac('sha256', key).update(token).digest('hex').slice(0, 32);
}

/** The tenant directory name of earlier versions. */
function legacyTenant(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 16);
}

/** Renames tenant directories named by the unsalted token hash to their keyed names. */
export function migrateTenantDirs(dataDir: string, tokens: string[], tenantOf: TenantOf, log: Logger): void {
  const tenants = path.join(dataDir, 'tenants');
  for (const token of tokens) {
    const from = path.join(tenants, legacyTenant(token));
    const to = path.join(tenants, tenantOf(token));
    if (!existsSync(from) || existsSync(to)) continue;
    renameSync(from, to);
    log.info('tenant directory renamed to its keyed name', { tenant: path.basename(to) });
  }
}
