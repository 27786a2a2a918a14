import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';

/**
 * A loopback HTTP + WebSocket server speaking the sandbox wire protocol. It
 * stands in for the conditions a real backend will not produce on demand
 * (a 503 then a 201, a page that fails, a 1-byte exit frame, an upgrade that
 * never completes). Each test sets `rest`, `exec` or `upgrade`.
 */
export interface RecordedRequest {
  method: string;
  url: URL;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export type RestHandler = (request: RecordedRequest, response: ServerResponse) => unknown;
export type ExecHandler = (socket: WebSocket, request: RecordedRequest) => void;

export interface FakeBackend {
  url: string;
  requests: RecordedRequest[];
  rest: RestHandler;
  exec: ExecHandler;
  /** When set, takes the raw upgrade instead of completing it (to stall or refuse it). */
  upgrade: ((request: IncomingMessage, socket: Socket) => void) | undefined;
  close(): Promise<void>;
}

export async function startFakeBackend(): Promise<FakeBackend> {
  const sockets = new Set<Socket>();
  const wss = new WebSocketServer({ noServer: true });
  const backend: FakeBackend = {
    url: '',
    requests: [],
    rest: (_request, response) => {
      response.writeHead(500).end();
    },
    exec: (socket) => socket.close(),
    upgrade: undefined,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      wss.close();
    },
  };
  const record = (request: IncomingMessage, body: Buffer): RecordedRequest => {
    const recorded = {
      method: request.method ?? 'GET',
      url: new URL(request.url ?? '/', 'http://fake'),
      headers: request.headers,
      body,
    };
    backend.requests.push(recorded);
    return recorded;
  };
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const recorded = record(request, Buffer.concat(chunks));
    try {
      await backend.rest(recorded, response);
    } catch (error) {
      response.writeHead(500).end(String(error));
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => {
    if (backend.upgrade) {
      record(request, Buffer.alloc(0));
      backend.upgrade(request, socket);
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => backend.exec(ws, record(request, Buffer.alloc(0))));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  backend.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return backend;
}

export function sendJson(response: ServerResponse, status: number, body: unknown, headers = {}): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** A binary frame with a stream-id prefix. */
export function frame(streamId: number, payload: string | Buffer = Buffer.alloc(0)): Buffer {
  const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload;
  return Buffer.concat([Buffer.from([streamId]), bytes]);
}

export function exitFrame4(code: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeInt32BE(code);
  return frame(3, payload);
}
