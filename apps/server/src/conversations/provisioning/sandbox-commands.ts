// Runs one provisioning command in a sandbox with its output streamed to the conversation's
// log writer (redacted there, like a turn's), under the spec's client-side timeout (rule 2).
import { type ExecStreamOptions, type SandboxClient, SandboxTimeoutError } from '@paddock/sandbox-client';
import type { LogWriter } from '../contracts.ts';

export interface SandboxCommand {
  argv: string[];
  env?: Record<string, string>;
  /** Relative to /home/sandbox (the backend's default). */
  dir?: string;
  timeoutMs: number;
  /** 'root': the sandbox's own root (package installs); default the sandbox user. */
  user?: 'root' | 'sandbox';
  stdin?: string;
}

/** The command was abandoned because the caller's signal fired. */
export class CommandCancelled extends Error {
  constructor() {
    super('cancelled');
    this.name = 'CommandCancelled';
  }
}

export type CommandOutcome = { exitCode: number } | { timedOut: true };

/** Streams stdout/stderr to `writer` (when given) and resolves with the exit code, or timedOut. */
export async function runStreaming(
  sandbox: SandboxClient,
  name: string,
  command: SandboxCommand,
  writer: Pick<LogWriter, 'output'> | null,
  signal?: AbortSignal,
): Promise<CommandOutcome> {
  const options: ExecStreamOptions = {
    cmd: command.argv,
    timeoutMs: command.timeoutMs,
    retry: true,
    stdin: command.stdin !== undefined,
    ...(command.env ? { env: command.env } : {}),
    ...(command.dir ? { dir: command.dir } : {}),
    // The backend's root exec (sandboxd `user=root`); a backend that runs everything as root ignores it.
    ...(command.user === 'root' ? { user: 'root' as const } : {}),
    ...(writer
      ? {
          onStdout: (chunk: Buffer) => writer.output('stdout', chunk),
          onStderr: (chunk: Buffer) => writer.output('stderr', chunk),
        }
      : {}),
  };
  if (signal?.aborted) throw new CommandCancelled();
  const handle = await sandbox.execStream(name, options);
  // Dropping the socket ends a plain exec on the backend; the caller does not wait for that.
  let abort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    abort = () => {
      handle.close();
      reject(new CommandCancelled());
    };
  });
  aborted.catch(() => {});
  signal?.addEventListener('abort', abort, { once: true });
  try {
    if (command.stdin !== undefined) {
      await handle.write(command.stdin);
      await handle.end();
    }
    return { exitCode: await Promise.race([handle.exited, aborted]) };
  } catch (err) {
    if (err instanceof SandboxTimeoutError) return { timedOut: true };
    throw err;
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}
