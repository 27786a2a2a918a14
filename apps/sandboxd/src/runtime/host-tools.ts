/**
 * The host programs sandboxd runs, and the environment it runs them with.
 *
 * Invariants (proved by test/security.host.test.ts and test/rootless.test.ts):
 * - Every host-side helper sandboxd spawns is started by the absolute path resolved here once, at start,
 *   through sandboxd's own PATH (the operator's); the commands of the init script are looked up on HOST_PATH.
 *   Nothing is ever looked up through a PATH a caller or a sandbox controls.
 * - Every host-side spawn gets HOST_ENV (plus fixed, sandboxd-named variables): nothing of an exec request's
 *   `env` configures a host process. The exec `env` travels as inert data (execEnv) and is applied by the
 *   sandbox's own shell after every namespace was entered, as the sandbox user (EXEC_LOADER).
 */
import { accessSync, closeSync, constants, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { HOST_PATH } from '../config.ts';

/** The environment of host-side processes: system directories only on PATH, nothing else. */
export const HOST_ENV: Readonly<Record<string, string>> = Object.freeze({ PATH: HOST_PATH });

const TOOLS = ['nsenter', 'unshare', 'sh', 'cp', 'chmod', 'chown', 'mkfifo'] as const;
export type HostTool = (typeof TOOLS)[number];
/** `perl` is optional: without it the proxy listener is opened by a node helper (namespaces.ts). */
export type HostTools = Readonly<Record<HostTool, string>> & { readonly perl: string | null };

/** The first executable `tool` in the absolute directories of `searchPath` (HOST_PATH when unset). */
function which(searchPath: string | undefined, tool: string): string | null {
  for (const dir of (searchPath || HOST_PATH).split(':').filter((d) => path.isAbsolute(d))) {
    const candidate = path.join(dir, tool);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return null;
}

/** Resolves every helper to an absolute path; throws naming the first one that cannot be found. */
export function resolveHostTools(searchPath: string | undefined): HostTools {
  const out: Partial<Record<HostTool, string>> = {};
  for (const tool of TOOLS) {
    const found = which(searchPath, tool);
    if (!found)
      throw new Error(`${tool} not found on PATH (${searchPath || HOST_PATH}); install util-linux/coreutils`);
    out[tool] = found;
  }
  return { ...(out as Record<HostTool, string>), perl: which(searchPath, 'perl') };
}

/**
 * The helpers of disk images (runtime/disks.ts), resolved like HostTools but optional: without one of them
 * sandboxd runs with directory layers (the reason is logged), so it is `missing` rather than an error.
 */
const DISK_TOOLS = ['truncate', 'mkfs.ext4', 'mount', 'umount', 'losetup', 'fsfreeze', 'cp'] as const;
export type DiskTool = (typeof DISK_TOOLS)[number];
export type DiskTools = Readonly<Record<DiskTool, string>>;

export function resolveDiskTools(searchPath: string | undefined): DiskTools | { missing: string } {
  const out: Partial<Record<DiskTool, string>> = {};
  for (const tool of DISK_TOOLS) {
    const found = which(searchPath, tool);
    if (!found) return { missing: tool };
    out[tool] = found;
  }
  return out as DiskTools;
}

/** Exec environment keys: what a POSIX shell can export, minus the loader's own prefix. */
export const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const ENV_RESERVED_PREFIX = 'SBX_ENV_';

/**
 * Run by the sandbox's own /bin/sh, as the sandbox user, inside every namespace: turns the SBX_ENV_* data
 * variables into the exec environment, drops everything else of the host-side environment, changes to the
 * working directory (resolved inside the sandbox root) and execs the command. Keys were validated against
 * ENV_KEY_RE (they are also what the shell splits and evals).
 *   sh -c EXEC_LOADER sandbox-exec <dir> <cmd> [args...]
 */
export const EXEC_LOADER = [
  'for SBX_ENV_KEY in $SBX_ENV_KEYS; do eval "SBX_ENV_VAL=\\$SBX_ENV_V_$SBX_ENV_KEY; unset SBX_ENV_V_$SBX_ENV_KEY; export $SBX_ENV_KEY=\\"\\$SBX_ENV_VAL\\""; done',
  'case " $SBX_ENV_KEYS " in *" PATH "*) ;; *) unset PATH ;; esac',
  'unset SBX_ENV_KEYS SBX_ENV_KEY SBX_ENV_VAL',
  'cd -- "$1" 2>/dev/null || { printf "cannot change directory to %s\\n" "$1" >&2; exit 125; }',
  'unset OLDPWD',
  'shift',
  'exec "$@"',
].join('\n');

/** The host-side environment of an exec: HOST_ENV plus the exec `env` as inert SBX_ENV_* data. */
export function execEnv(env: Record<string, string>): Record<string, string> {
  const keys = Object.keys(env);
  const out: Record<string, string> = { ...HOST_ENV, SBX_ENV_KEYS: keys.join(' ') };
  for (const k of keys) out[`SBX_ENV_V_${k}`] = env[k]!;
  return out;
}

/** Linux's limit on one string of an execve's argv or environment (MAX_ARG_STRLEN: 32 pages). */
export const MAX_ARG_STRLEN = 32 * 4096;

/**
 * Linux's limit on an execve's argv and environment together, strings and pointers (fs/exec.c): a quarter
 * of the stack limit, at most 6 MiB (the stack limit as this process has it, which its children inherit).
 */
export function execArgsLimit(limits = safeReadLimits()): number {
  const soft = /^Max stack size\s+(\S+)/m.exec(limits)?.[1];
  const stack = soft && /^\d+$/.test(soft) ? Number(soft) : Number.POSITIVE_INFINITY;
  return Math.min(Math.floor(stack / 4), 6 * 1024 * 1024);
}

function safeReadLimits(): string {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return '';
  }
}

function kib(bytes: number): string {
  return `${Math.ceil(bytes / 1024)} KiB`;
}

/**
 * Why Linux would refuse to start `argv` with `env` (E2BIG), or null: a string over MAX_ARG_STRLEN or the
 * whole over `limit`. `names` says what to call the environment's entries in the message (the exec's own
 * keys, not the host-side data variables); a value is never part of it.
 */
export function execTooLarge(
  argv: readonly string[],
  env: Readonly<Record<string, string>>,
  limit: number,
  names: (key: string) => string = (key) => key,
): string | null {
  let total = 8; // the two NULL pointers
  for (const [i, arg] of argv.entries()) {
    const bytes = Buffer.byteLength(arg) + 1;
    if (bytes > MAX_ARG_STRLEN)
      return `argument ${i} of the command is ${kib(bytes)}; Linux takes at most ${kib(MAX_ARG_STRLEN)} per argument (E2BIG)`;
    total += bytes + 8;
  }
  for (const [key, value] of Object.entries(env)) {
    const bytes = Buffer.byteLength(key) + 1 + Buffer.byteLength(value) + 1;
    if (bytes > MAX_ARG_STRLEN)
      return `environment variable ${names(key)} is ${kib(bytes)}; Linux takes at most ${kib(MAX_ARG_STRLEN)} per variable (E2BIG)`;
    total += bytes + 8;
  }
  if (total > limit)
    return `the command and its environment take ${kib(total)}; Linux starts a process with at most ${kib(limit)} of them (E2BIG)`;
  return null;
}

/** Linux's O_CLOEXEC as /proc/<pid>/fdinfo shows it (node's fs.constants does not have it). */
const O_CLOEXEC = 0o2000000;

/**
 * Closes the file descriptors this process inherited without close-on-exec (from whatever started it: a
 * shell, a test runner, a supervisor, sandboxd for a session shim). Every child would pass them on, down to
 * sandbox processes. Node opens its own with close-on-exec, so only inherited ones (and leaks) are closed.
 * Run once, first thing in main (sandboxd) and in a session shim.
 */
export function closeInheritedFds(): number[] {
  const closed: number[] = [];
  for (const e of readdirSync('/proc/self/fd')) {
    const fd = Number(e);
    if (fd <= 2) continue;
    let flags: number;
    try {
      flags = Number.parseInt(
        /^flags:\s+([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1] ?? '',
        8,
      );
    } catch {
      continue; // the directory's own fd, already closed
    }
    if (Number.isNaN(flags) || (flags & O_CLOEXEC) !== 0) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {}
  }
  return closed;
}
