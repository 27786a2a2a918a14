// `paddock shell <conversation>`: an interactive shell in the conversation's live sandbox, over
// the terminal WebSocket (GET /api/conversations/:id/terminal, docs/api.md "Terminal").
//
// What must hold (apps/cli/test/shell.test.ts):
// - On a terminal, stdin is put in raw mode (every key, Ctrl-C included, goes to the sandbox's
//   shell) and restored however the command ends (exit, refusal, a dropped connection, an error).
// - The remote size follows the local one: the initial size, then a resize on every SIGWINCH.
// - The exit status is the remote shell's exit code; a connection lost without one is 1 with a
//   message; a refusal (409 sandbox_not_running, 404, 403) is 1 with the server's message.
// - Without a terminal (stdin piped), the bytes are forwarded as they are, so a script can drive it.
import type { Command } from 'commander';
import WebSocket from 'ws';
import { resolveConfig } from './config.ts';
import { type CommandContext, ExitStatus } from './conversations.ts';
import { CliError } from './errors.ts';

export interface ShellStreams {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };
  stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number; rows?: number };
}

function refusalMessage(status: number, body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: string; message?: string };
    if (parsed.message) return `${parsed.message} (${status}${parsed.error ? ` ${parsed.error}` : ''})`;
  } catch {
    // not JSON
  }
  if (status === 401)
    return 'the server refused the API key (401): run `paddock login` again or set PADDOCK_API_KEY';
  return `the server refused the terminal (${status})`;
}

/** Runs the shell until it ends; resolves with its exit code. */
export async function runShell(
  ctx: CommandContext,
  conversationId: string,
  streams: ShellStreams,
): Promise<number> {
  const config = resolveConfig(ctx.env);
  if (!config.apiKey) throw new CliError('not logged in: run `paddock login` or set PADDOCK_API_KEY');
  const { stdin, stdout } = streams;
  const size = () => ({ cols: stdout.columns ?? 80, rows: stdout.rows ?? 24 });
  const initial = size();
  const url = new URL(`${config.url}/api/conversations/${encodeURIComponent(conversationId)}/terminal`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('cols', String(initial.cols));
  url.searchParams.set('rows', String(initial.rows));
  const socket = new WebSocket(url, {
    headers: { authorization: `Bearer ${config.apiKey}`, 'x-paddock-client': 'cli' },
    perMessageDeflate: false,
  });

  const raw = stdin.isTTY === true && typeof stdin.setRawMode === 'function';
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    if (raw) stdin.setRawMode?.(false);
    stdin.pause();
  };
  const onResize = () => {
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'resize', ...size() }));
  };

  try {
    return await new Promise<number>((resolve, reject) => {
      let exitCode: number | null = null;
      let opened = false;
      socket.once('unexpected-response', (_request, response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => {
          if (body.length < 64 * 1024) body += chunk.toString('utf8');
        });
        response.on('end', () => reject(new CliError(refusalMessage(response.statusCode ?? 0, body))));
      });
      socket.once('error', (error) => {
        if (!opened)
          reject(new CliError(`cannot reach the Paddock server at ${config.url} (${error.message})`));
      });
      socket.once('open', () => {
        opened = true;
        if (raw) stdin.setRawMode?.(true);
        stdin.on('data', (chunk: Buffer | string) => {
          if (socket.readyState === WebSocket.OPEN)
            socket.send(typeof chunk === 'string' ? Buffer.from(chunk) : chunk, { binary: true });
        });
        // Piped input: its end ends the shell. A TTY has no EOF, only the Ctrl-D byte, which the
        // shell reads as the end only at an empty prompt: it is sent until the shell has gone
        // (a command still running reads it as its own end of input first).
        if (!raw)
          stdin.once('end', () => {
            const eof = () => {
              if (socket.readyState === WebSocket.OPEN) socket.send(Buffer.from([4]), { binary: true });
            };
            eof();
            const timer = setInterval(eof, 300);
            socket.once('close', () => clearInterval(timer));
          });
        stdin.resume();
        process.on('SIGWINCH', onResize);
      });
      socket.on('message', (data: Buffer, isBinary) => {
        if (isBinary) {
          stdout.write(data);
          return;
        }
        try {
          const message = JSON.parse(data.toString('utf8')) as {
            type?: string;
            code?: number;
            message?: string;
          };
          if (message.type === 'exit' && typeof message.code === 'number') exitCode = message.code;
          if (message.type === 'error' && message.message) ctx.io.err(`\r\npaddock: ${message.message}\r\n`);
        } catch {
          // not a control message of this protocol: ignored
        }
      });
      socket.once('close', () => {
        if (!opened) return;
        if (exitCode === null) {
          restore();
          ctx.io.err('\r\npaddock: the terminal connection ended without an exit code\r\n');
          resolve(1);
          return;
        }
        resolve(exitCode);
      });
    });
  } finally {
    process.off('SIGWINCH', onResize);
    restore();
    if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING)
      socket.terminate();
  }
}

export function registerShellCommand(program: Command, ctx: CommandContext): void {
  program
    .command('shell')
    .description("open an interactive shell in a conversation's live sandbox (exit status: the shell's)")
    .argument('<conversation>', 'conversation id')
    .action(async (id: string) => {
      const code = await runShell(ctx, id, { stdin: process.stdin, stdout: process.stdout });
      if (code !== 0) throw new ExitStatus(code);
    });
}
