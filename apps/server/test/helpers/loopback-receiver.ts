// A loopback HTTP receiver standing in for a collector outside this machine (an OTLP endpoint,
// an error-tracking service): it accepts every POST, records its path and decoded body (gzip or
// deflate undone), and answers 200 with `{}`.
import { createServer, type Server } from 'node:http';
import { gunzipSync, inflateSync } from 'node:zlib';

export interface ReceivedPost {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface LoopbackReceiver {
  url: string;
  port: number;
  posts: ReceivedPost[];
  close(): Promise<void>;
}

export async function startLoopbackReceiver(): Promise<LoopbackReceiver> {
  const posts: ReceivedPost[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let raw = Buffer.concat(chunks);
      const encoding = req.headers['content-encoding'];
      if (encoding === 'gzip') raw = gunzipSync(raw);
      else if (encoding === 'deflate') raw = inflateSync(raw);
      if (req.method === 'POST')
        posts.push({ path: req.url ?? '/', headers: req.headers, body: raw.toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    posts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
