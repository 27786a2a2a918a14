// A fault-injecting HTTP proxy in front of the real sandboxd (test code only): the server is
// pointed at the proxy (SANDBOX_BASE_URL), which forwards every call (REST, NDJSON streams and the
// exec WebSocket upgrades, byte for byte) unless a test scripted a fault for it. It records every
// request it saw, faulted or not, so a test can count attempts and measure the waits between them.
//
//   const proxy = await startSandboxFaultProxy(sandboxd.url);
//   proxy.fault({ method: 'POST', path: '/v1/sandboxes', nth: [1] }, { kind: 'status', status: 503 });
//   ... the server calls proxy.url ...
//   assert.equal(proxy.seen({ method: 'POST', path: '/v1/sandboxes' }).length, 2);
//   await proxy.close();
//
// Faults (one per matching request; the first rule that claims a request wins):
// - `status`: answers with that status and a JSON body (default `{error: 'injected', message}`);
//   the backend never sees the call.
// - `rate-limit`: 429 with `{error: 'sandbox_creation_rate_limited', retry_after_seconds}` (the
//   spec's rate-limit body); the backend never sees the call.
// - `hang`: never answers (the client's deadline must end the call). With `forward: true` the
//   backend does get the call and acts on it, only its answer is withheld.
// - `drop-request`: destroys the client's socket once the request head arrived (mid-request);
//   the backend never sees the call.
// - `drop-response`: forwards the call, sends the backend's status line and headers and the first
//   bytes of the body, then destroys the socket (mid-response): the backend acted, the client
//   cannot know.
import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';

export type SandboxFault =
  | { kind: 'status'; status: number; body?: unknown }
  | { kind: 'rate-limit'; retryAfterSeconds: number }
  | { kind: 'hang'; forward?: boolean }
  | { kind: 'drop-request' }
  | { kind: 'drop-response' };

export interface SeenRequest {
  method: string;
  /** The path without the query. */
  path: string;
  query: URLSearchParams;
  /** A WebSocket upgrade (exec, attach). */
  upgrade: boolean;
  /** When the request head arrived, `performance.now()` milliseconds. */
  at: number;
  /** The fault applied to it (its kind), or null when it was forwarded as is. */
  fault: SandboxFault['kind'] | null;
}

export interface RequestMatcher {
  method?: string;
  /** The exact path, or a pattern tested against it (no query). */
  path?: string | RegExp;
  /** Any further condition (e.g. on the exec's `cmd` query parameters). */
  where?: (request: SeenRequest) => boolean;
}

export interface FaultRule extends RequestMatcher {
  /**
   * Which of the requests this rule matches are faulted, counted from 1 since the rule was added:
   * a list of occurrences, or `'every'` (default) for all of them until the rule is removed.
   */
  nth?: number[] | 'every';
}

export interface SandboxFaultProxy {
  /** The address to hand the server (SANDBOX_BASE_URL). */
  url: string;
  /** Adds a rule; the returned function removes it. */
  fault(rule: FaultRule, fault: SandboxFault): () => void;
  /** Removes every rule (what is hanging keeps hanging until close). */
  clearFaults(): void;
  /** Every request seen so far that matches, in arrival order. */
  seen(matcher?: RequestMatcher): SeenRequest[];
  /** Resolves once `count` requests matching have been seen (default: 20 s, then throws). */
  waitForRequests(matcher: RequestMatcher, count: number, timeoutMs?: number): Promise<SeenRequest[]>;
  /** Forgets the requests seen so far. */
  resetLog(): void;
  close(): Promise<void>;
}

interface Rule {
  rule: FaultRule;
  fault: SandboxFault;
  matched: number;
}

export function matches(matcher: RequestMatcher, request: SeenRequest): boolean {
  if (matcher.method !== undefined && matcher.method.toUpperCase() !== request.method) return false;
  if (typeof matcher.path === 'string' && matcher.path !== request.path) return false;
  if (matcher.path instanceof RegExp && !matcher.path.test(request.path)) return false;
  if (matcher.where && !matcher.where(request)) return false;
  return true;
}

/** Starts the proxy on a free loopback port, forwarding to `target` (sandboxd's base URL). */
export async function startSandboxFaultProxy(target: string): Promise<SandboxFaultProxy> {
  const upstream = new URL(target);
  const upstreamPort = Number(upstream.port || 80);
  const upstreamHost = upstream.hostname;
  const rules: Rule[] = [];
  const log: SeenRequest[] = [];
  const sockets = new Set<Duplex>();
  const waiters = new Set<() => void>();

  const track = (socket: Duplex): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };

  /** Records the request and picks the fault for it (each rule counts the requests it matches). */
  const classify = (req: IncomingMessage, upgrade: boolean): SandboxFault | null => {
    const url = new URL(req.url ?? '/', 'http://proxy.invalid');
    const seen: SeenRequest = {
      method: (req.method ?? 'GET').toUpperCase(),
      path: url.pathname,
      query: url.searchParams,
      upgrade,
      at: performance.now(),
      fault: null,
    };
    let chosen: SandboxFault | null = null;
    for (const entry of rules) {
      if (!matches(entry.rule, seen)) continue;
      entry.matched++;
      const nth = entry.rule.nth ?? 'every';
      if (chosen === null && (nth === 'every' || nth.includes(entry.matched))) chosen = entry.fault;
    }
    seen.fault = chosen?.kind ?? null;
    log.push(seen);
    for (const wake of waiters) wake();
    return chosen;
  };

  const bodyOf = (fault: Extract<SandboxFault, { kind: 'status' | 'rate-limit' }>): string =>
    JSON.stringify(
      fault.kind === 'rate-limit'
        ? {
            error: 'sandbox_creation_rate_limited',
            message: 'too many sandboxes created, slow down',
            retry_after_seconds: fault.retryAfterSeconds,
          }
        : (fault.body ?? { error: 'injected', message: `injected fault ${fault.status}` }),
    );

  const forward = (
    req: IncomingMessage,
    onResponse: (upstreamRes: IncomingMessage) => void,
    onError: () => void,
  ): void => {
    const proxied = http.request({
      host: upstreamHost,
      port: upstreamPort,
      method: req.method,
      path: req.url,
      headers: req.headers,
      agent: false,
    });
    proxied.on('response', onResponse);
    proxied.on('error', onError);
    req.pipe(proxied);
  };

  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const fault = classify(req, false);
    const fail = () => res.destroy();
    switch (fault?.kind) {
      case undefined:
        forward(
          req,
          (upstreamRes) => {
            res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.rawHeaders);
            upstreamRes.pipe(res);
            upstreamRes.on('error', fail);
          },
          fail,
        );
        return;
      case 'status':
      case 'rate-limit': {
        req.resume();
        const body = bodyOf(fault);
        res.writeHead(fault.kind === 'rate-limit' ? 429 : fault.status, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        });
        res.end(body);
        return;
      }
      case 'hang':
        if (fault.forward)
          forward(
            req,
            (upstreamRes) => upstreamRes.resume(),
            () => {},
          );
        else req.resume();
        return;
      case 'drop-request':
        req.socket.destroy();
        return;
      case 'drop-response':
        forward(
          req,
          (upstreamRes) => {
            const status = upstreamRes.statusCode ?? 200;
            upstreamRes.resume();
            if (status === 204 || status === 304) {
              // No body to cut: the status line is cut instead.
              req.socket.write(`HTTP/1.1 ${status}`);
              setTimeout(() => req.socket.destroy(), 20);
              return;
            }
            // The head (announcing more body than will come), at most a few bytes of the body,
            // then the socket goes.
            const headers: http.OutgoingHttpHeaders = { ...upstreamRes.headers, 'content-length': 1000 };
            delete headers['transfer-encoding'];
            res.writeHead(status, headers);
            res.flushHeaders();
            upstreamRes.once('data', (chunk: Buffer) =>
              res.write(chunk.subarray(0, Math.min(8, chunk.length))),
            );
            setTimeout(() => req.socket.destroy(), 20);
          },
          fail,
        );
        return;
    }
  });
  server.on('connection', track);
  server.keepAliveTimeout = 1000;

  // WebSocket upgrades (exec, attach): the request head is replayed upstream, then bytes flow both ways.
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    track(socket);
    socket.on('error', () => {});
    const fault = classify(req, true);
    switch (fault?.kind) {
      case 'status':
      case 'rate-limit': {
        const body = bodyOf(fault);
        const status = fault.kind === 'rate-limit' ? 429 : fault.status;
        socket.end(
          `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\n` +
            'content-type: application/json\r\n' +
            `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
        );
        return;
      }
      case 'hang':
        if (!fault.forward) return;
        break;
      case 'drop-request':
        socket.destroy();
        return;
      default:
        break;
    }
    const up = net.connect(upstreamPort, upstreamHost);
    track(up);
    up.on('error', () => socket.destroy());
    socket.on('close', () => up.destroy());
    up.on('close', () => socket.destroy());
    up.once('connect', () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      up.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) up.write(head);
      if (fault?.kind === 'hang') {
        up.resume(); // the backend's answer is swallowed
        return;
      }
      if (fault?.kind === 'drop-response') {
        // The switching-protocols head (or the first bytes of it) reaches the client, then nothing.
        up.once('data', (chunk: Buffer) => {
          socket.write(chunk.subarray(0, Math.min(8, chunk.length)));
          setTimeout(() => socket.destroy(), 20);
        });
        return;
      }
      up.pipe(socket);
      socket.pipe(up);
    });
  });

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address() as net.AddressInfo;

  const seen = (matcher: RequestMatcher = {}) => log.filter((r) => matches(matcher, r));

  return {
    url: `http://127.0.0.1:${address.port}`,
    fault(rule, fault) {
      const entry: Rule = { rule, fault, matched: 0 };
      rules.push(entry);
      return () => {
        const at = rules.indexOf(entry);
        if (at >= 0) rules.splice(at, 1);
      };
    },
    clearFaults() {
      rules.length = 0;
    },
    seen,
    async waitForRequests(matcher, count, timeoutMs = 20_000) {
      if (seen(matcher).length >= count) return seen(matcher);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `the proxy saw ${seen(matcher).length} of ${count} requests in ${timeoutMs} ms: ` +
                JSON.stringify(log.map((r) => `${r.method} ${r.path}${r.fault ? ` [${r.fault}]` : ''}`)),
            ),
          );
        }, timeoutMs);
        const check = () => {
          if (seen(matcher).length < count) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
      });
      return seen(matcher);
    },
    resetLog() {
      log.length = 0;
    },
    async close() {
      rules.length = 0;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await closed;
    },
  };
}
