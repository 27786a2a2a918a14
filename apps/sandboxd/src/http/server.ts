/**
 * HTTP + WebSocket surface of the sandbox interface (/v1/sandboxes...). Thin: parse, call the service,
 * render. Every route, including the WebSocket upgrade, requires `Authorization: Bearer <token>`;
 * the token's keyed hash scopes every lookup (tenant, see tenants.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { NdjsonLine } from '../checkpoints.service.ts';
import { AppError, errorBody } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { RuntimeLayer } from '../runtime/layer.ts';
import type { SandboxesService } from '../sandboxes.service.ts';
import type { TenantOf } from '../tenants.ts';

const JSON_LIMIT = 1024 * 1024;
/**
 * An exec's request line carries its argv and env (`cmd=`, `env=` query parameters, as the Sprites API
 * has them), so the request head is as large as the environment a sandbox is given: a service passes
 * every secret of an environment (up to 64 KiB each) to every exec. node's default (16 KiB) refused
 * such an exec with 431. 4 MiB is above what Linux takes as one exec's argv and env together (about
 * 2 MiB; a larger one fails with E2BIG), even percent-encoded.
 */
export const MAX_REQUEST_HEAD_BYTES = 4 * 1024 * 1024;

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

export function createAuth(tokens: string[], tenantOf: TenantOf) {
  const digests = tokens.map(digest);
  return (header: string | undefined): string | null => {
    const m = /^Bearer\s+(.+)$/i.exec(header ?? '');
    if (!m) return null;
    const d = digest(m[1]!.trim());
    let ok = false;
    for (const t of digests) ok = timingSafeEqual(t, d) || ok;
    return ok ? tenantOf(m[1]!.trim()) : null;
  };
}

function send(res: http.ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const text = JSON.stringify(body);
  res
    .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
    .end(text);
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > JSON_LIMIT) throw new AppError('payload_too_large', 'request body too large');
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new AppError('bad_request', 'request body must be JSON');
  }
}

function requestUrl(req: http.IncomingMessage): URL {
  try {
    return new URL(req.url ?? '/', 'http://sandboxd');
  } catch {
    throw new AppError('bad_request', 'malformed request target');
  }
}

/** Path segments, percent-decoded; a malformed escape (`%ZZ`) is the client's error, not ours. */
function pathParts(pathname: string): string[] {
  try {
    return pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    throw new AppError('bad_request', 'malformed percent-encoding in the request path');
  }
}

function rejectUpgrade(socket: Duplex, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}

export function createHttpServer(deps: {
  service: SandboxesService;
  /** GET /v1/runtime-layer (absent: the route answers state `off`) */
  layer?: RuntimeLayer;
  tokens: string[];
  tenantOf: TenantOf;
  log: Logger;
}): http.Server {
  const { service, log } = deps;
  const auth = createAuth(deps.tokens, deps.tenantOf);
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 * 1024 });

  async function route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = requestUrl(req);
    const method = req.method ?? 'GET';
    if (url.pathname === '/health' && method === 'GET') return send(res, 200, { status: 'ok' });
    const tenant = auth(req.headers.authorization);
    if (!tenant) throw new AppError('unauthorized', 'missing or invalid bearer token');
    const parts = pathParts(url.pathname);
    if (parts[0] === 'v1' && parts[1] === 'runtime-layer' && parts.length === 2 && method === 'GET') {
      return send(
        res,
        200,
        deps.layer?.status() ?? {
          state: 'off',
          version: null,
          path: null,
          bin: null,
          packages: {},
          progress: null,
          error: null,
        },
      );
    }
    if (parts[0] !== 'v1' || parts[1] !== 'sandboxes') throw new AppError('not_found', 'no such route');
    const [, , name, sub, id, action] = parts;
    if (name === undefined) {
      if (method === 'POST') return send(res, 201, await service.create(tenant, await readJson(req)));
      if (method === 'GET')
        return send(res, 200, service.list(tenant, url.searchParams.get('continuation_token') ?? undefined));
    } else if (sub === undefined) {
      if (method === 'GET') return send(res, 200, service.get(tenant, name));
      if (method === 'DELETE') {
        await service.destroy(tenant, name);
        return send(res, 204);
      }
    } else if (sub === 'fs' && id === 'write' && action === undefined && method === 'PUT') {
      await service.writeFile(tenant, name, url.searchParams, req);
      return send(res, 204);
    } else if (sub === 'exec' && id === undefined && method === 'GET') {
      return send(res, 200, service.listSessions(tenant, name));
    } else if (sub === 'policy' && id === 'network' && action === undefined) {
      if (method === 'POST') {
        service.setPolicy(tenant, name, await readJson(req));
        return send(res, 204);
      }
      if (method === 'GET') return send(res, 200, service.getPolicy(tenant, name));
    } else if (sub === 'checkpoint' && id === undefined && method === 'POST') {
      service.assertExists(tenant, name);
      return ndjson(res, (emit) => service.checkpoint(tenant, name, emit));
    } else if (sub === 'checkpoints' && id === undefined && method === 'GET') {
      return send(res, 200, service.listCheckpoints(tenant, name));
    } else if (sub === 'checkpoints' && id !== undefined && action === undefined && method === 'DELETE') {
      await service.deleteCheckpoint(tenant, name, id);
      return send(res, 204);
    } else if (sub === 'checkpoints' && id !== undefined && action === 'restore' && method === 'POST') {
      service.assertExists(tenant, name);
      service.assertCheckpoint(tenant, id);
      return ndjson(res, (emit) => service.restore(tenant, name, id, emit));
    }
    throw new AppError('not_found', 'no such route');
  }

  /** Streams NDJSON lines; a failure becomes a final {"type":"error"} line (status is already 200). */
  async function ndjson(
    res: http.ServerResponse,
    run: (emit: (l: NdjsonLine) => void) => Promise<void>,
  ): Promise<void> {
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
    const emit = (l: NdjsonLine) => res.write(`${JSON.stringify(l)}\n`);
    try {
      await run(emit);
    } catch (err) {
      log.error('ndjson operation failed', { err });
      const message = err instanceof AppError ? err.message : 'operation failed';
      emit({ type: 'error', error: message, message, time: new Date().toISOString() });
    }
    res.end();
  }

  const server = http.createServer({ maxHeaderSize: MAX_REQUEST_HEAD_BYTES }, (req, res) => {
    route(req, res).catch((err: unknown) => {
      const { status, body } = errorBody(err);
      if (status >= 500)
        log.error('request failed', { method: req.method, path: req.url?.split('?')[0], err });
      if (res.headersSent) res.destroy();
      else send(res, status, body);
    });
  });

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    void (async () => {
      const tenant = auth(req.headers.authorization);
      if (!tenant)
        return rejectUpgrade(socket, 401, {
          error: 'unauthorized',
          message: 'missing or invalid bearer token',
        });
      const url = requestUrl(req);
      const parts = pathParts(url.pathname);
      if (
        parts[0] !== 'v1' ||
        parts[1] !== 'sandboxes' ||
        !parts[2] ||
        parts[3] !== 'exec' ||
        parts.length > 5
      ) {
        return rejectUpgrade(socket, 404, { error: 'not_found', message: 'no such route' });
      }
      const name = parts[2];
      const sessionId = parts[4];
      if (sessionId !== undefined) {
        const session = service.findSession(tenant, name, sessionId);
        wss.handleUpgrade(req, socket, head, (ws) => session.attach(ws, false));
        return;
      }
      service.assertExists(tenant, name);
      const params = service.parseExec(url.searchParams);
      const session = await service.startExec(tenant, name, params);
      let attached = false;
      // A non-detachable exec whose client vanished before the upgrade completed must not linger.
      socket.once('close', () => {
        if (!attached && !params.detachable) session.kill();
      });
      wss.handleUpgrade(req, socket, head, (ws) => {
        attached = true;
        session.attach(ws, true);
      });
    })().catch((err: unknown) => {
      const { status, body } = errorBody(err);
      if (status >= 500) log.error('exec upgrade failed', { path: req.url?.split('?')[0], err });
      rejectUpgrade(socket, status, body);
    });
  });
  return server;
}
