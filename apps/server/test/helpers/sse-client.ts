// A real HTTP client for server-sent events: parses the wire format as a browser would.
import http from 'node:http';

export interface SseMessage {
  /** 'message' when the event has no `event:` field; 'comment' for `: ping` lines. */
  event: string;
  id?: string;
  data?: string;
  /** When the message was parsed (performance.now()). */
  at: number;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  messages: SseMessage[];
  /** Every byte received, as text. */
  raw(): string;
  /** Resolves with the first message (from `from` on) that matches; rejects after `ms`. */
  next(pick: (m: SseMessage) => boolean, ms?: number, from?: number): Promise<SseMessage>;
  /** Resolves when the server ends the response. */
  ended: Promise<void>;
  close(): void;
}

export function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers: { accept: 'text/event-stream', ...headers } }, (response) => {
      response.setEncoding('utf8');
      const messages: SseMessage[] = [];
      const waiters = new Set<() => void>();
      let buffer = '';
      let all = '';
      let resolveEnded!: () => void;
      const ended = new Promise<void>((r) => {
        resolveEnded = r;
      });
      response.on('data', (text: string) => {
        all += text;
        buffer += text;
        let cut = buffer.indexOf('\n\n');
        while (cut >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          cut = buffer.indexOf('\n\n');
          const message: SseMessage = { event: 'message', at: performance.now() };
          let isComment = true;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'retry') continue;
            isComment = false;
            if (field === 'event') message.event = value;
            else if (field === 'id') message.id = value;
            else if (field === 'data')
              message.data = message.data === undefined ? value : `${message.data}\n${value}`;
          }
          if (isComment) {
            if (block.startsWith(':'))
              messages.push({ event: 'comment', data: block.slice(1).trim(), at: message.at });
          } else messages.push(message);
        }
        for (const wake of [...waiters]) wake();
      });
      response.on('end', () => {
        resolveEnded();
        for (const wake of [...waiters]) wake();
      });
      response.on('error', () => resolveEnded());
      response.on('close', () => resolveEnded());
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        messages,
        raw: () => all,
        ended,
        next(pick, ms = 5000, from = 0) {
          return new Promise((ok, fail) => {
            const check = (): boolean => {
              const found = messages.slice(from).find(pick);
              if (!found) return false;
              waiters.delete(wake);
              clearTimeout(timer);
              ok(found);
              return true;
            };
            const wake = (): void => {
              check();
            };
            const timer = setTimeout(() => {
              waiters.delete(wake);
              fail(new Error(`no matching event within ${ms} ms; got ${JSON.stringify(messages.slice(-5))}`));
            }, ms);
            waiters.add(wake);
            check();
          });
        },
        close() {
          request.destroy();
        },
      });
    });
    request.on('error', reject);
  });
}
