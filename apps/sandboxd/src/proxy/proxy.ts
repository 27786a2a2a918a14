/**
 * Per-sandbox egress proxy: HTTP CONNECT, plain HTTP forward proxy and SOCKS5 on one listener (the first
 * byte tells SOCKS5, 0x05, from HTTP). Host names are resolved here, never inside the sandbox.
 *
 * Invariants (proved by test/egress.test.ts):
 * - every upstream connection passes policy.decide(host) and addressAllowed(resolved ip);
 * - setPolicy() applies to new connections at once and destroys open tunnels whose host is now denied.
 */
import dns from 'node:dns/promises';
import http from 'node:http';
import net from 'node:net';
import type { Logger } from '../log.ts';
import { addressAllowed, type CompiledPolicy, compilePolicy, type PolicyRule } from './policy.ts';

export interface ProxyDeps {
  log: Logger;
  /** Test/dev only: names resolved from this map instead of DNS, exempt from the address refusal. */
  hostsOverride: Map<string, string>;
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

export class EgressProxy {
  private policy: CompiledPolicy = compilePolicy([]);
  private readonly tunnels = new Set<Tunnel>();
  private readonly http: http.Server;
  private readonly deps: ProxyDeps;
  private readonly sandbox: string;

  constructor(deps: ProxyDeps, sandbox: string, rules: PolicyRule[]) {
    this.deps = deps;
    this.sandbox = sandbox;
    this.policy = compilePolicy(rules);
    this.http = http.createServer({ requestTimeout: 0, headersTimeout: 60_000 });
    this.http.on('request', (req, res) => void this.forward(req, res));
    this.http.on('connect', (req, socket, head) => void this.connect(req, socket as net.Socket, head));
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
  }

  /** Entry point for a connection accepted on the sandbox's proxy listener. */
  handle(socket: net.Socket): void {
    socket.on('error', () => socket.destroy());
    socket.once('readable', () => {
      const first = socket.read(1) as Buffer | null;
      if (!first) return;
      socket.unshift(first);
      if (first[0] === 0x05) this.socks(socket);
      else this.http.emit('connection', socket);
    });
  }

  /** Resolves and authorizes host:port; resolves to the IP to dial. */
  private async authorize(hostRaw: string, port: number): Promise<string> {
    const host = hostRaw
      .replace(/^\[|\]$/g, '')
      .toLowerCase()
      .replace(/\.$/, '');
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Refused(400, 'bad port');
    const policy = this.policy;
    if (policy.decide(host) === 'deny')
      throw new Refused(403, `egress to ${host} is denied by the sandbox network policy`);
    const override = this.deps.hostsOverride.get(host);
    if (override) return override;
    const ip = net.isIP(host) !== 0 ? host : (await dns.lookup(host).catch(() => null))?.address;
    if (!ip) throw new Refused(502, `cannot resolve ${host}`);
    if (!addressAllowed(ip, policy.enforcing))
      throw new Refused(403, `egress to ${host} (${ip}) is refused: private or local address`);
    return ip;
  }

  private track(host: string, sockets: net.Socket[]): void {
    const t: Tunnel = { host: host.toLowerCase(), sockets };
    this.tunnels.add(t);
    for (const s of sockets) s.once('close', () => this.tunnels.delete(t));
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
      const msg = err instanceof Error ? err.message : 'refused';
      client.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n${msg}\n`,
      );
      return;
    }
    const upstream = net.connect({ host: ip, port });
    upstream.on('error', () => {
      if (!client.destroyed) client.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n');
    });
    client.on('error', () => upstream.destroy());
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    this.track(host, [client, upstream]);
  }

  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
      if (url.protocol !== 'http:') throw new Error('scheme');
    } catch {
      res
        .writeHead(400, { 'content-type': 'text/plain' })
        .end('absolute http:// URL required (use CONNECT for https)\n');
      return;
    }
    const host = url.hostname;
    const port = url.port ? Number(url.port) : 80;
    let ip: string;
    try {
      ip = await this.authorize(host, port);
    } catch (err) {
      const status = err instanceof Refused ? err.status : 502;
      res
        .writeHead(status, { 'content-type': 'text/plain' })
        .end(`${err instanceof Error ? err.message : 'refused'}\n`);
      return;
    }
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers))
      if (!HOP_HEADERS.has(k) && v !== undefined) headers[k] = v;
    const upstream = http.request({
      host: ip,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      setHost: false,
      agent: false,
    });
    upstream.on('socket', (s) => this.track(host, [s, req.socket]));
    upstream.on('response', (up) => {
      const out: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(up.headers)) if (!HOP_HEADERS.has(k) && v !== undefined) out[k] = v;
      res.writeHead(up.statusCode ?? 502, out);
      up.pipe(res);
    });
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end('upstream error\n');
      else res.destroy();
    });
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
        void this.authorize(host, port).then(
          (ip) => {
            const upstream = net.connect({ host: ip, port });
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
            upstream.on('close', () => socket.destroy());
            socket.on('close', () => upstream.destroy());
            this.track(host, [socket, upstream]);
          },
          (err: unknown) => socket.end(reply(err instanceof Refused && err.status === 403 ? 2 : 4)),
        );
      }
    };
    socket.on('data', onData);
  }
}
