/**
 * Per-sandbox egress proxy: HTTP CONNECT, plain HTTP forward proxy and SOCKS5 on one listener (the first
 * byte tells SOCKS5, 0x05, from HTTP). Host names are resolved here, never inside the sandbox.
 *
 * Invariants (proved by test/egress.test.ts and test/security.egress.test.ts):
 * - every upstream connection passes policy.decide(host) and guard.permits(the resolved address it dials),
 *   for CONNECT, absolute-form requests and SOCKS alike (addresses.ts: never the host, loopback, link-local
 *   or, unless the operator opened them, private ranges);
 * - setPolicy() applies to new connections at once and destroys open tunnels whose host is now denied;
 * - at most limits.connectionsMax client connections per sandbox are open: beyond that a new one is closed at
 *   once, so one sandbox cannot exhaust sandboxd's file descriptors;
 * - a connection that has not finished its handshake (request line and headers, SOCKS greeting and request,
 *   and the upstream connect) within limits.handshakeTimeoutMs is closed, and so is any connection without
 *   a byte either way for limits.idleTimeoutMs;
 * - nothing a client or an upstream sends can throw out of this module: every socket, request and response
 *   has an error handler, malformed upstream responses answer 502, and the async handlers catch everything.
 */
import dns from 'node:dns/promises';
import http from 'node:http';
import net from 'node:net';
import { deniedReason, notPublicReason } from '@paddock/sandbox-client/egress-refusals';
import type { Logger } from '../log.ts';
import type { EgressGuard } from './addresses.ts';
import { type CompiledPolicy, compilePolicy, type PolicyRule } from './policy.ts';

export interface ProxyLimits {
  /** Client connections open at once, per sandbox. */
  connectionsMax: number;
  /** From accept until the request is read and the upstream connected. */
  handshakeTimeoutMs: number;
  /** Without a byte in either direction. */
  idleTimeoutMs: number;
}

export interface ProxyDeps {
  log: Logger;
  /** Test/dev only: names resolved from this map instead of DNS (the addresses are checked like DNS answers). */
  hostsOverride: Map<string, string>;
  /**
   * Operator-configured routes to the platform service (SANDBOXD_SERVICE_ROUTES): this exact name
   * and port are dialled at the configured address without the address guard (it may be loopback
   * or this host); any other port of the name is refused. The policy still applies by name.
   */
  serviceRoutes?: Map<string, { ip: string; port: number }>;
  guard: EgressGuard;
  limits: ProxyLimits;
}

interface Tunnel {
  host: string;
  sockets: net.Socket[];
}

class Refused extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * The reason phrase of the proxy's own answers (refusals, bad gateway): the standard text, then why
 * (printable ASCII, at most 200 characters). Clients print it where they print nothing of the body:
 * npm's "403 Forbidden (egress to registry.npmjs.org is refused: not a public address) - GET …",
 * pip's "Tunnel connection failed: 403 Forbidden (…)", apt's "Failed to fetch … 403 Forbidden (…)".
 * It goes back only to the sandbox that asked (the host name is its own) and is never logged here:
 * a name may carry a secret, and sandboxd's log has no redactor.
 */
function reasonPhrase(status: number, why: string): string {
  return `${http.STATUS_CODES[status] ?? 'Refused'} (${why.replace(/[^\x20-\x7e]/g, '?').slice(0, 200)})`;
}

const HOP_HEADERS = new Set([
  'proxy-connection',
  'proxy-authorization',
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** How often the "connection cap reached" warning may be logged per sandbox. */
const CAP_WARNING_INTERVAL_MS = 60_000;

export class EgressProxy {
  private policy: CompiledPolicy = compilePolicy([]);
  private readonly tunnels = new Set<Tunnel>();
  /** accepted client connections still open, with their handshake deadline until established */
  private readonly open = new Map<net.Socket, NodeJS.Timeout | null>();
  private readonly http: http.Server;
  private readonly deps: ProxyDeps;
  private readonly sandbox: string;
  private capWarnedAt = Number.NEGATIVE_INFINITY;

  constructor(deps: ProxyDeps, sandbox: string, rules: PolicyRule[]) {
    this.deps = deps;
    this.sandbox = sandbox;
    this.policy = compilePolicy(rules);
    this.http = http.createServer({ requestTimeout: 0 });
    this.http.on('request', (req, res) => {
      this.forward(req, res).catch(() => req.socket.destroy());
    });
    this.http.on('connect', (req, socket, head) => {
      this.connect(req, socket as net.Socket, head).catch(() => socket.destroy());
    });
    this.http.on('clientError', (_err, socket) => socket.destroy());
  }

  setPolicy(rules: PolicyRule[]): void {
    this.policy = compilePolicy(rules);
    for (const t of this.tunnels) {
      if (this.policy.decide(t.host) === 'deny') {
        this.deps.log.info('proxy: closing tunnel to newly denied host', {
          sandbox: this.sandbox,
          host: t.host,
        });
        for (const s of t.sockets) s.destroy();
        this.tunnels.delete(t);
      }
    }
  }

  closeAll(): void {
    for (const t of this.tunnels) for (const s of t.sockets) s.destroy();
    this.tunnels.clear();
    for (const s of [...this.open.keys()]) s.destroy();
  }

  /** Entry point for a connection accepted on the sandbox's proxy listener. */
  handle(socket: net.Socket): void {
    socket.on('error', () => socket.destroy());
    const { connectionsMax, handshakeTimeoutMs, idleTimeoutMs } = this.deps.limits;
    if (this.open.size >= connectionsMax) {
      socket.destroy();
      const now = Date.now();
      if (now - this.capWarnedAt >= CAP_WARNING_INTERVAL_MS) {
        this.capWarnedAt = now;
        this.deps.log.warn('proxy: connection cap reached, closing new connections', {
          sandbox: this.sandbox,
          max: connectionsMax,
        });
      }
      return;
    }
    const deadline = setTimeout(() => socket.destroy(), handshakeTimeoutMs);
    deadline.unref();
    this.open.set(socket, deadline);
    socket.once('close', () => {
      const t = this.open.get(socket);
      if (t) clearTimeout(t);
      this.open.delete(socket);
    });
    socket.setTimeout(idleTimeoutMs, () => socket.destroy());
    socket.once('readable', () => {
      const first = socket.read(1) as Buffer | null;
      if (!first) return;
      socket.unshift(first);
      if (first[0] === 0x05) this.socks(socket);
      else this.http.emit('connection', socket);
    });
  }

  /** The client's handshake is over (its upstream is connected): only the idle timeout applies now. */
  private established(client: net.Socket): void {
    const t = this.open.get(client);
    if (t) {
      clearTimeout(t);
      this.open.set(client, null);
    }
  }

  /** Resolves and authorizes host:port; resolves to the IP to dial. */
  private async authorize(hostRaw: string, port: number): Promise<string> {
    const host = hostRaw
      .replace(/^\[|\]$/g, '')
      .toLowerCase()
      .replace(/\.$/, '');
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Refused(400, 'bad port');
    const policy = this.policy;
    if (policy.decide(host) === 'deny') throw new Refused(403, deniedReason(host));
    const route = this.deps.serviceRoutes?.get(host);
    if (route) {
      if (port !== route.port)
        throw new Refused(403, `egress to ${host}:${port} is refused: not the service port`);
      return route.ip;
    }
    const ip =
      this.deps.hostsOverride.get(host) ??
      (net.isIP(host) !== 0 ? host : (await dns.lookup(host).catch(() => null))?.address);
    if (!ip) throw new Refused(502, `cannot resolve ${host}`);
    // The address checked is the address dialled: a name that resolves to a refused address is refused.
    if (!this.deps.guard.permits(ip)) throw new Refused(403, notPublicReason(host));
    return ip;
  }

  private track(host: string, sockets: net.Socket[]): void {
    const t: Tunnel = { host: host.toLowerCase(), sockets };
    this.tunnels.add(t);
    for (const s of sockets) s.once('close', () => this.tunnels.delete(t));
  }

  /** Dials ip:port with the handshake and idle timeouts of the client connection. */
  private dial(client: net.Socket, ip: string, port: number): net.Socket {
    const upstream = net.connect({ host: ip, port });
    upstream.setTimeout(this.deps.limits.handshakeTimeoutMs, () => upstream.destroy());
    upstream.once('connect', () => {
      upstream.setTimeout(this.deps.limits.idleTimeoutMs);
      this.established(client);
    });
    // A client being told 502 (ended, not destroyed) gets the answer before the socket goes.
    upstream.on('close', () => {
      if (!client.writableEnded) client.destroy();
    });
    client.on('close', () => upstream.destroy());
    return upstream;
  }

  private async connect(req: http.IncomingMessage, client: net.Socket, head: Buffer): Promise<void> {
    const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(req.url ?? '');
    if (!m) {
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const host = m[1]!.replace(/^\[|\]$/g, '');
    const port = Number(m[2]);
    let ip: string;
    try {
      ip = await this.authorize(host, port);
    } catch (err) {
      const status = err instanceof Refused ? err.status : 502;
      const msg = err instanceof Refused ? err.message : 'refused';
      client.end(
        `HTTP/1.1 ${status} ${reasonPhrase(status, msg)}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n${msg}\n`,
      );
      return;
    }
    if (client.destroyed) return;
    const upstream = this.dial(client, ip, port);
    upstream.on('error', () => {
      if (!client.destroyed) client.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n');
    });
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    this.track(host, [client, upstream]);
  }

  /**
   * Answers a forwarded request with a short text, also in the reason phrase, or drops the
   * connection if that is no longer possible.
   */
  private answer(res: http.ServerResponse, status: number, text: string): void {
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    try {
      res
        .writeHead(status, reasonPhrase(status, text), { 'content-type': 'text/plain', connection: 'close' })
        .end(`${text}\n`);
    } catch {
      res.destroy();
    }
  }

  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const client = req.socket;
    req.on('error', () => client.destroy());
    res.on('error', () => client.destroy());
    let url: URL;
    try {
      url = new URL(req.url ?? '');
      if (url.protocol !== 'http:') throw new Error('scheme');
    } catch {
      this.answer(res, 400, 'absolute http:// URL required (use CONNECT for https)');
      return;
    }
    const host = url.hostname;
    const port = url.port ? Number(url.port) : 80;
    let ip: string;
    try {
      ip = await this.authorize(host, port);
    } catch (err) {
      this.answer(
        res,
        err instanceof Refused ? err.status : 502,
        err instanceof Refused ? err.message : 'refused',
      );
      return;
    }
    if (client.destroyed) return;
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers))
      if (!HOP_HEADERS.has(k) && v !== undefined) headers[k] = v;
    let upstream: http.ClientRequest;
    try {
      upstream = http.request({
        host: ip,
        port,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers,
        setHost: false,
        agent: false,
      });
    } catch {
      this.answer(res, 400, 'this request cannot be forwarded');
      return;
    }
    upstream.on('socket', (s) => {
      s.setTimeout(this.deps.limits.handshakeTimeoutMs, () => s.destroy());
      s.once('connect', () => {
        s.setTimeout(this.deps.limits.idleTimeoutMs);
        this.established(client);
      });
      this.track(host, [s, client]);
    });
    upstream.on('response', (up) => {
      up.on('error', () => res.destroy());
      // Node's client parses status codes it cannot send (000, 1xx as final): those are malformed here.
      const status = up.statusCode ?? 0;
      if (!Number.isInteger(status) || status < 200 || status > 599) {
        upstream.destroy();
        this.answer(res, 502, 'malformed upstream response');
        return;
      }
      const out: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(up.headers)) if (!HOP_HEADERS.has(k) && v !== undefined) out[k] = v;
      try {
        res.writeHead(status, out);
      } catch {
        upstream.destroy();
        this.answer(res, 502, 'malformed upstream response');
        return;
      }
      up.pipe(res);
    });
    // 101 to a request that did not ask for it: node hands over the socket, which nobody may use here.
    upstream.on('upgrade', (_up, socket: net.Socket) => {
      socket.destroy();
      this.answer(res, 502, 'malformed upstream response');
    });
    upstream.on('error', () => this.answer(res, 502, 'upstream error'));
    req.pipe(upstream);
  }

  /** SOCKS5 (RFC 1928), no authentication, CONNECT only. */
  private socks(socket: net.Socket): void {
    let buf = Buffer.alloc(0);
    let stage: 'greeting' | 'request' | 'done' = 'greeting';
    const reply = (rep: number) => Buffer.from([5, rep, 0, 1, 0, 0, 0, 0, 0, 0]);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (stage === 'greeting') {
        if (buf.length < 2) return;
        const n = buf[1]!;
        if (buf.length < 2 + n) return;
        const methods = buf.subarray(2, 2 + n);
        buf = buf.subarray(2 + n);
        if (!methods.includes(0)) {
          socket.end(Buffer.from([5, 0xff]));
          stage = 'done';
          return;
        }
        socket.write(Buffer.from([5, 0]));
        stage = 'request';
      }
      if (stage === 'request') {
        if (buf.length < 5) return;
        const cmd = buf[1]!;
        const atyp = buf[3]!;
        let host: string;
        let off: number;
        if (atyp === 1) {
          if (buf.length < 10) return;
          host = [...buf.subarray(4, 8)].join('.');
          off = 8;
        } else if (atyp === 3) {
          const len = buf[4]!;
          if (buf.length < 5 + len + 2) return;
          host = buf.subarray(5, 5 + len).toString('latin1');
          off = 5 + len;
        } else if (atyp === 4) {
          if (buf.length < 22) return;
          const parts: string[] = [];
          for (let i = 0; i < 16; i += 2) parts.push(buf.readUInt16BE(4 + i).toString(16));
          host = parts.join(':');
          off = 20;
        } else {
          socket.end(reply(8));
          stage = 'done';
          return;
        }
        const port = buf.readUInt16BE(off);
        const rest = buf.subarray(off + 2);
        stage = 'done';
        socket.off('data', onData);
        socket.pause();
        if (cmd !== 1) {
          socket.end(reply(7));
          return;
        }
        this.authorize(host, port).then(
          (ip) => {
            if (socket.destroyed) return;
            const upstream = this.dial(socket, ip, port);
            upstream.once('connect', () => {
              socket.write(reply(0));
              if (rest.length > 0) upstream.write(rest);
              upstream.pipe(socket);
              socket.pipe(upstream);
              socket.resume();
            });
            upstream.on('error', () => {
              if (!socket.destroyed) socket.end(reply(5));
            });
            this.track(host, [socket, upstream]);
          },
          (err: unknown) => socket.end(reply(err instanceof Refused && err.status === 403 ? 2 : 4)),
        );
      }
    };
    socket.on('data', onData);
  }
}
