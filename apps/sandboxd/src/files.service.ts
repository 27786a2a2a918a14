/**
 * The files API: `PUT /v1/sandboxes/:name/fs/write` checked and resolved here, written into the sandbox by
 * exec/file-writer.ts (the sandbox user's process inside the sandbox's namespaces, never a host-side open
 * of a sandbox path).
 *
 * Invariants:
 * - The target is an absolute path of the sandbox: `path` relative to `workingDir`, itself relative to the
 *   sandbox user's home; NUL and a mode that is not octal are the caller's error (400), before the sandbox
 *   is started.
 * - A write needs only the sandbox's init, not its proxy listener (it runs no program that could use the
 *   network), and starts the sandbox if it is not running (503 sandbox_unavailable if that fails).
 * - A failed write answers write_failed with the sandbox's reason, without sandboxd's own program names.
 * Tests: test/file-writes.test.ts, test/security.planted-links.test.ts (a write through a planted link).
 */
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from './errors.ts';
import type { FileWriter } from './exec/file-writer.ts';
import { SANDBOX_HOME } from './runtime/base.ts';
import type { InitHandle } from './runtime/namespaces.ts';

/** What the files API uses of a sandbox (the Sandbox of sandboxes.service.ts). */
export interface FilesSandbox {
  readonly writer: FileWriter;
}

export interface FilesDeps<S extends FilesSandbox> {
  /** The tenant's sandbox; throws sandbox_not_found. */
  find(tenant: string, name: string): S;
  /** Starts the sandbox if needed; throws sandbox_unavailable (without `needListener`: the init only). */
  ready(sb: S, needListener: boolean): Promise<InitHandle>;
}

export function createFilesService<S extends FilesSandbox>(deps: FilesDeps<S>) {
  return {
    async writeFile(tenant: string, name: string, query: URLSearchParams, body: Readable): Promise<void> {
      const sb = deps.find(tenant, name);
      const p = query.get('path');
      if (!p) throw new AppError('bad_request', 'path is required');
      if (p.includes('\0')) throw new AppError('bad_request', 'path must not contain NUL');
      const wd = query.get('workingDir') || SANDBOX_HOME;
      const target = path.posix.resolve(
        path.posix.resolve('/', wd.startsWith('/') ? wd : path.posix.join(SANDBOX_HOME, wd)),
        p,
      );
      const modeRaw = query.get('mode') || '0644';
      if (!/^0?[0-7]{3,4}$/.test(modeRaw)) throw new AppError('bad_request', 'mode must be octal, e.g. 0644');
      const mkdirs = ['true', '1'].includes(query.get('mkdirParents') ?? '');
      // A write runs no program that could use the network: the proxy listener may still be opening.
      const h = await deps.ready(sb, false);
      const { code, stderr } = await sb.writer.write(h, { target, mode: modeRaw, mkdirs }, body);
      if (code !== 0) {
        throw new AppError(
          'write_failed',
          `cannot write ${target}: ${stderr.replace(/^(\/bin\/sh|fswrite): (\d+: )?/gm, '').trim()}`,
        );
      }
    },
  };
}
