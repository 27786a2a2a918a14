// The sandbox's files, read-only, while it lives: a directory listing, a file's content, a
// tarball of a directory. Every read runs one fixed script in the sandbox (FILES_SCRIPT) as the
// sandbox user, the request's path given as an argument (never spliced into the script).
//
// What must hold (tests in test/work.files.test.ts):
// 1. Confined to the home: a path is relative to /home/sandbox; `..` segments, absolute paths
//    and NUL bytes are refused (422) before the sandbox is asked. The sandbox resolves the path
//    (`realpath`, every symlink followed) and refuses (403) a path that resolves outside the
//    home: a symlink is never followed out of it. Tests: "refuses traversal…", "a symlink out of
//    the home is refused".
// 2. Paddock's own files are never listed, served or archived: `.paddock/` in the home (the env
//    file, the setup script, the session state) is left out of the home's listing and of a
//    tarball, and a path that resolves into it is refused (403), whichever way it was named
//    (a symlink to it included). The check and the read are one script, so the path read is
//    the path checked. Tests: "the env file is refused…".
// 3. Every byte served passes the conversation's redactor (files-access.ts): names in a
//    listing, a file's content (streamed through a streaming redactor, a secret split across
//    chunks included), and every file inside a tarball (redacted before compression, each
//    entry's size rewritten: files-tar.ts). Test: "a secret written into a file is redacted…".
// 4. Bounded: a listing holds at most MAX_ENTRIES entries (`truncated: true` beyond); a file
//    over INLINE_MAX_BYTES is 413 `file_too_large` unless downloaded (`?download=1`, up to
//    DOWNLOAD_MAX_BYTES, streamed with backpressure: the sandbox's socket is paused while the
//    client is behind); a tarball of a directory over ARCHIVE_MAX_BYTES (before compression) is
//    413. Test: "a file over 1 MiB is 413 unless downloaded".
import type { ExecHandle, SandboxClient } from '@paddock/sandbox-client';
import { AppError } from '../../http/errors.ts';
import type { SecretRegistry } from '../log/redactor.ts';
import { PADDOCK_DIR_NAME, SANDBOX_HOME } from './files-access.ts';

export const MAX_ENTRIES = 5000;
export const INLINE_MAX_BYTES = 1024 * 1024;
export const DOWNLOAD_MAX_BYTES = 256 * 1024 * 1024;
export const ARCHIVE_MAX_BYTES = 64 * 1024 * 1024;
/** Bytes of a file's head looked at for a NUL byte (binary), as git does. */
const SNIFF_BYTES = 8000;
const PATH_MAX_CHARS = 4096;

/**
 * $1 the path relative to the home ('' for the home), $2 the mode (list, content, archive),
 * $3 the size limit. The first stdout line is `ERR <reason>` or `OK|BIG <size> <binary>`, then
 * (OK only) the bytes: NUL-separated fields of each entry for list, the file for content, an
 * uncompressed tar for archive.
 */
export const FILES_SCRIPT = `set -u
home=${SANDBOX_HOME}
own="$home/${PADDOCK_DIR_NAME}"
rel=$1 mode=$2 limit=$3
if [ -z "$rel" ]; then p=$home; else p=$home/$rel; fi
t=$(realpath -e -- "$p" 2>/dev/null) || { printf 'ERR missing\\n'; exit 0; }
case $t in "$home"|"$home"/*) ;; *) printf 'ERR outside\\n'; exit 0;; esac
case $t in "$own"|"$own"/*) printf 'ERR paddock\\n'; exit 0;; esac
case $mode in
list)
  [ -d "$t" ] || { printf 'ERR notdir\\n'; exit 0; }
  [ -r "$t" ] && [ -x "$t" ] || { printf 'ERR unreadable\\n'; exit 0; }
  printf 'OK 0 0\\n'
  find "$t" -mindepth 1 -maxdepth 1 ! -path "$own" -printf '%y\\0%Y\\0%s\\0%T@\\0%f\\0' 2>/dev/null | head -z -n $(( (limit + 1) * 5 ))
  ;;
content)
  [ -d "$t" ] && { printf 'ERR isdir\\n'; exit 0; }
  [ -f "$t" ] || { printf 'ERR special\\n'; exit 0; }
  [ -r "$t" ] || { printf 'ERR unreadable\\n'; exit 0; }
  size=$(stat -c %s -- "$t")
  bin=0
  [ "$(head -c ${SNIFF_BYTES} -- "$t" | tr -d '\\000' | wc -c)" = "$(head -c ${SNIFF_BYTES} -- "$t" | wc -c)" ] || bin=1
  [ "$size" -gt "$limit" ] && { printf 'BIG %s %s\\n' "$size" "$bin"; exit 0; }
  printf 'OK %s %s\\n' "$size" "$bin"
  exec cat -- "$t"
  ;;
archive)
  [ -d "$t" ] || { printf 'ERR notdir\\n'; exit 0; }
  if [ "$t" = "$home" ]; then set -- --anchored --exclude=./${PADDOCK_DIR_NAME}; else set --; fi
  size=$(cd -- "$t" && du -sb --exclude=./${PADDOCK_DIR_NAME} . 2>/dev/null | cut -f1)
  [ "\${size:-0}" -gt "$limit" ] && { printf 'BIG %s 0\\n' "$size"; exit 0; }
  printf 'OK %s 0\\n' "\${size:-0}"
  cd -- "$t" && exec tar "$@" --format=gnu -cf - . 2>/dev/null
  ;;
esac
printf 'ERR mode\\n'
`;

/** The path as the files API takes it: relative to the home, normalised; throws 422/403 (invariants 1, 2). */
export function normalizePath(raw: string | undefined): string {
  const path = raw ?? '';
  const refuse = (message: string) => AppError.validation({ path: [message] });
  if (path.length > PATH_MAX_CHARS) throw refuse(`must be at most ${PATH_MAX_CHARS} characters`);
  if (path.includes('\0')) throw refuse('must not contain a NUL byte');
  if (path.startsWith('/'))
    throw refuse(`must be relative to the sandbox's home (${SANDBOX_HOME}), e.g. "src/main.ts"`);
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw refuse('must not contain ".." (paths stay inside the home)');
  if (segments[0] === PADDOCK_DIR_NAME) throw paddockRefusal();
  return segments.join('/');
}

function paddockRefusal(): AppError {
  return new AppError(
    'forbidden',
    `Paddock's own files (${SANDBOX_HOME}/${PADDOCK_DIR_NAME}/) are never served`,
  );
}

function refusalOf(reason: string, path: string): AppError {
  const shown = path === '' ? SANDBOX_HOME : path;
  switch (reason) {
    case 'missing':
      return new AppError('not_found', `no such file or directory: ${shown}`);
    case 'outside':
      return new AppError(
        'forbidden',
        `${shown} resolves outside the sandbox's home (${SANDBOX_HOME}): not served`,
      );
    case 'paddock':
      return paddockRefusal();
    case 'notdir':
      return AppError.validation({ path: ['is not a directory (read a file with /files/content)'] });
    case 'isdir':
      return AppError.validation({
        path: ['is a directory: list it with /files, or download it with ?archive=tar.gz'],
      });
    case 'special':
      return AppError.validation({ path: ['is not a regular file (a device, a socket or a FIFO)'] });
    case 'unreadable':
      return new AppError('forbidden', `${shown} is not readable by the sandbox user`);
    default:
      return new AppError('internal_error', 'the sandbox answered the files script unexpectedly');
  }
}

export type EntryType = 'file' | 'dir' | 'symlink' | 'other';

export interface FileEntry {
  name: string;
  /** Relative to the home. */
  path: string;
  type: EntryType;
  /** For a symlink: what it points at (a dead or looping link: null). */
  target_type: EntryType | null;
  size: number;
  mtime: string;
}

const TYPES: Record<string, EntryType> = { f: 'file', d: 'dir', l: 'symlink' };
const typeOf = (letter: string | undefined): EntryType => TYPES[letter ?? ''] ?? 'other';

export interface FilesDeps {
  sandbox: SandboxClient;
}

/** Runs the script to its end (list mode): its header and body. */
async function runToEnd(
  deps: FilesDeps,
  sandboxName: string,
  path: string,
  mode: 'list',
  limit: number,
): Promise<{ header: string; body: Buffer }> {
  const result = await deps.sandbox.exec(sandboxName, {
    cmd: ['bash', '-c', FILES_SCRIPT, 'paddock-files', path, mode, String(limit)],
    timeoutMs: 30_000,
    maxOutputBytes: 8 * 1024 * 1024,
  });
  const newline = result.stdout.indexOf(0x0a);
  if (newline < 0) throw new AppError('internal_error', 'the sandbox answered the files script unexpectedly');
  return {
    header: result.stdout.subarray(0, newline).toString('utf8'),
    body: result.stdout.subarray(newline + 1),
  };
}

export async function listDirectory(
  deps: FilesDeps,
  sandboxName: string,
  registry: SecretRegistry,
  path: string,
): Promise<{ path: string; entries: FileEntry[]; truncated: boolean }> {
  const { header, body } = await runToEnd(deps, sandboxName, path, 'list', MAX_ENTRIES);
  const [status, reason] = header.split(' ');
  if (status !== 'OK') throw refusalOf(reason ?? '', path);
  const fields = body.toString('utf8').split('\0');
  const entries: FileEntry[] = [];
  for (let i = 0; i + 5 <= fields.length; i += 5) {
    const [y, yTarget, size, mtime, rawName] = fields.slice(i, i + 5);
    if (rawName === undefined || rawName === '') continue;
    const name = registry.redact(rawName).toString('utf8');
    const type = typeOf(y);
    entries.push({
      name,
      path: path === '' ? name : `${path}/${name}`,
      type,
      target_type: type === 'symlink' ? (yTarget === 'N' || yTarget === 'L' ? null : typeOf(yTarget)) : null,
      size: Number(size) || 0,
      mtime: new Date(Math.floor(Number(mtime) * 1000) || 0).toISOString(),
    });
  }
  const truncated = entries.length > MAX_ENTRIES;
  entries.length = Math.min(entries.length, MAX_ENTRIES);
  const isDir = (e: FileEntry) => e.type === 'dir' || (e.type === 'symlink' && e.target_type === 'dir');
  entries.sort(
    (a, b) => Number(isDir(b)) - Number(isDir(a)) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
  return { path, entries, truncated };
}

export interface OpenedRead {
  /** The file's size (content), or the directory's bytes before compression (archive). */
  size: number;
  binary: boolean;
  /**
   * Starts the bytes after the header: each chunk to `onData` (return false to pause the socket
   * until `resume()`), then `onEnd` once the command ended.
   */
  handle: ExecHandle;
  start(onData: (chunk: Buffer) => boolean, onEnd: (error: Error | null) => void): void;
  resume(): void;
  abort(): void;
}

/**
 * Opens a streaming read (content or archive). Settles once the script's header line is in:
 * refusals and sizes over the limit throw before any byte is served.
 */
export async function openRead(
  deps: FilesDeps,
  sandboxName: string,
  path: string,
  mode: 'content' | 'archive',
): Promise<OpenedRead> {
  const limit = mode === 'archive' ? ARCHIVE_MAX_BYTES : DOWNLOAD_MAX_BYTES;
  let header: Buffer | null = Buffer.alloc(0);
  const early: Buffer[] = [];
  let sink: ((chunk: Buffer) => boolean) | null = null;
  let headerSettled!: (line: string) => void;
  let headerFailed!: (error: Error) => void;
  const headerLine = new Promise<string>((resolve, reject) => {
    headerSettled = resolve;
    headerFailed = reject;
  });
  let handle: ExecHandle | undefined;
  const deliver = (chunk: Buffer): void => {
    if (chunk.length === 0) return;
    if (sink === null) {
      early.push(chunk);
      handle?.pause();
      return;
    }
    if (!sink(chunk)) handle?.pause();
  };
  handle = await deps.sandbox.execStream(sandboxName, {
    cmd: ['bash', '-c', FILES_SCRIPT, 'paddock-files', path, mode, String(limit)],
    onStdout: (chunk) => {
      if (header === null) {
        deliver(chunk);
        return;
      }
      const joined: Buffer = Buffer.concat([header, chunk]);
      const newline = joined.indexOf(0x0a);
      if (newline < 0) {
        header = joined;
        if (joined.length > 256)
          headerFailed(new AppError('internal_error', 'the files script answered unexpectedly'));
        return;
      }
      header = null;
      headerSettled(joined.subarray(0, newline).toString('utf8'));
      deliver(joined.subarray(newline + 1));
    },
  });
  const opened = handle;
  opened.exited.then(
    () => headerFailed(new AppError('internal_error', 'the files script ended without an answer')),
    (error: Error) => headerFailed(error),
  );
  let line: string;
  try {
    line = await headerLine;
  } catch (error) {
    opened.close();
    throw error;
  }
  const [status, first, second] = line.split(' ');
  if (status === 'ERR') {
    opened.close();
    throw refusalOf(first ?? '', path);
  }
  const size = Number(first) || 0;
  if (status === 'BIG') {
    opened.close();
    throw new AppError(
      'file_too_large',
      mode === 'archive'
        ? `the directory holds ${size} bytes; a tarball is at most ${ARCHIVE_MAX_BYTES} bytes before compression: archive a subdirectory`
        : `the file is ${size} bytes; at most ${limit} bytes are served`,
      { extra: { size, limit } },
    );
  }
  return {
    size,
    binary: second === '1',
    handle: opened,
    start(onData, onEnd) {
      sink = onData;
      let behind = false;
      for (const chunk of early.splice(0)) if (!onData(chunk)) behind = true;
      if (!behind) opened.resume();
      opened.exited.then(
        () => onEnd(null),
        (error: Error) => onEnd(error),
      );
    },
    resume: () => opened.resume(),
    abort: () => opened.close(),
  };
}
