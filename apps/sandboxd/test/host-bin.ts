import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * A host tool by absolute path. Tests may put a failing stand-in first on the daemon's PATH, and an ordinary
 * user's PATH has no sbin directories (`ip`, `mkfs.ext4`).
 */
export function hostBin(name: string): string {
  for (const dir of ['/usr/bin', '/bin', '/usr/sbin', '/sbin']) {
    if (existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return name;
}
