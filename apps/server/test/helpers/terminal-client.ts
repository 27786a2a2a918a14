// A client of the terminal WebSocket (GET /api/conversations/:id/terminal) for tests and the
// terminal bench: speaks the documented protocol (binary frames both ways, JSON text frames for
// resize and exit) with the headers a test chooses (bearer, cookie, Origin).
import WebSocket from 'ws';

export interface TerminalClient {
  /** Everything the server sent as terminal bytes so far, decoded. */
  readonly output: string;
  write(text: string): void;
  resize(cols: number, rows: number): void;
  /** Resolves once the output (from `from`, default 0) matches. */
  waitFor(pattern: RegExp | string, options?: { timeoutMs?: number; from?: number }): Promise<void>;
  /** The code of the server's exit message (null: closed without one). */
  readonly exited: Promise<number | null>;
  /** The close code. */
  readonly closed: Promise<number>;
  /** Every text frame the server sent, parsed. */
  readonly controls: Record<string, unknown>[];
  close(): void;
}

export type TerminalOpen = { status: 101; client: TerminalClient } | { status: number; body: string };

export async function openTerminal(
  baseUrl: string,
  conversationId: string,
  headers: Record<string, string>,
  query = '',
): Promise<TerminalOpen> {
  const url = `${baseUrl.replace(/^http/, 'ws')}/api/conversations/${conversationId}/terminal${query}`;
  const socket = new WebSocket(url, { headers, perMessageDeflate: false });
  let output = '';
  const decoder = new TextDecoder();
  const controls: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  let exitCode: number | null = null;
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
  const exited = closed.then(() => exitCode);
  socket.on('message', (data: Buffer, isBinary) => {
    if (isBinary) output += decoder.decode(data, { stream: true });
    else {
      const message = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      controls.push(message);
      if (message['type'] === 'exit') exitCode = message['code'] as number;
    }
    for (const wake of waiters) wake();
  });
  return await new Promise<TerminalOpen>((resolve, reject) => {
    socket.once('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8');
      });
      response.on('end', () => {
        socket.terminate();
        resolve({ status: response.statusCode ?? 0, body });
      });
    });
    socket.once('error', (error) => reject(error));
    socket.once('open', () => {
      const client: TerminalClient = {
        get output() {
          return output;
        },
        controls,
        exited,
        closed,
        write: (text) => socket.send(Buffer.from(text, 'utf8'), { binary: true }),
        resize: (cols, rows) => socket.send(JSON.stringify({ type: 'resize', cols, rows })),
        waitFor(pattern, { timeoutMs = 15_000, from = 0 } = {}) {
          const matches = () =>
            typeof pattern === 'string'
              ? output.slice(from).includes(pattern)
              : pattern.test(output.slice(from));
          if (matches()) return Promise.resolve();
          return new Promise<void>((done, fail) => {
            const timer = setTimeout(() => {
              waiters.delete(check);
              fail(
                new Error(
                  `terminal output did not match ${pattern} in ${timeoutMs} ms: ${JSON.stringify(output)}`,
                ),
              );
            }, timeoutMs);
            const check = () => {
              if (!matches()) return;
              clearTimeout(timer);
              waiters.delete(check);
              done();
            };
            waiters.add(check);
          });
        },
        close: () => socket.close(1000),
      };
      resolve({ status: 101, client });
    });
  });
}
