// The server as its own process (fixtures/serve-scripted.ts: the real `serve` boot with the
// scripted runtime), for the tests that kill it mid-turn and start it again
// (conversations.kill9.test.ts, apps/cli/test/conversations.restart.test.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'serve-scripted.ts');

export interface ServerProcess {
  /** Starts the server with the env as it is now; resolves with its URL once it says it is ready. */
  start(): Promise<string>;
  /** Sends `signal` and waits for the exit (nothing when it is not running). */
  stop(signal: NodeJS.Signals): Promise<void>;
  /** The running server's process id (null when it is not running). */
  pid(): number | null;
}

export interface ServerProcessOptions {
  /** The lifecycle tick of the process (200 ms by default; the production default is 60 s). */
  tickMs?: number;
  /** How often it looks for orphans (the production default when omitted). */
  orphanProbeMs?: number;
  /** Every chunk the server writes to stderr (its log), as written. */
  onLog?: (chunk: string) => void;
}

export function scriptedServerProcess(
  env: () => NodeJS.ProcessEnv,
  readyTimeoutMs: number,
  { tickMs = 200, orphanProbeMs, onLog }: ServerProcessOptions = {},
): ServerProcess {
  let server: ChildProcess | null = null;
  return {
    async start() {
      const child = spawn(
        process.execPath,
        [FIXTURE, String(tickMs), ...(orphanProbeMs ? [String(orphanProbeMs)] : [])],
        {
          env: env(),
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      server = child;
      let errTail = '';
      child.stderr?.on('data', (d: Buffer) => {
        errTail = (errTail + d.toString()).slice(-4000);
        onLog?.(d.toString());
      });
      return await new Promise<string>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(
          () => reject(new Error(`server not ready in ${readyTimeoutMs / 1000} s: ${errTail}`)),
          readyTimeoutMs,
        );
        child.stdout?.on('data', (d: Buffer) => {
          out += d.toString();
          const line = out.split('\n').find((l) => l.includes('"ready":true'));
          if (line) {
            clearTimeout(timer);
            resolve((JSON.parse(line) as { url: string }).url);
          }
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`server exited with ${code}: ${errTail}`));
        });
      });
    },
    async stop(signal) {
      const child = server;
      server = null;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill(signal);
      await exited;
    },
    pid: () => server?.pid ?? null,
  };
}
