/** sandboxd's own files on disk: atomic JSON records and removal of sandbox and checkpoint trees. */
import { execFile } from 'node:child_process';
import { renameSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { promisify } from 'node:util';
import { HOST_ENV } from './runtime/host-tools.ts';

const execFileP = promisify(execFile);

export function writeJsonAtomic(file: string, value: unknown): void {
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, file);
}

/**
 * fs.rm of a sandbox directory. The kernel creates overlay work dirs (`work/<d>/work`) with mode 000: root
 * removes them anyway, a rootless sandboxd must make its tree accessible first (`chmod`: HostTools' absolute path).
 */
export async function removeTree(p: string, chmod: string): Promise<void> {
  try {
    await fs.rm(p, { recursive: true, force: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EACCES') throw err;
    await execFileP(chmod, ['-R', 'u+rwx', '--', p], { env: HOST_ENV }).catch(() => {});
    await fs.rm(p, { recursive: true, force: true });
  }
}
