// The console under test in real headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core), against the real server, PostgreSQL and sandboxd of the conversation
// harness (scripted runtime: the prompt is the turn's shell script).
//
// The browser reaches the server through a recording reverse proxy on loopback, so the test
// sees every byte of every response the browser received — including the SSE stream, which
// a browser-side hook cannot read to its end — for the "no secret reaches the browser"
// check. The proxy's origin is the server's PUBLIC_URL, so CSRF checks run as in production.
//
//   const c = await startConsoleHarness();
//   const page = await c.page();
//   await page.goto(c.url('/sign-up'));
//   await c.axe(page, 'sign up');          // fails on serious/critical violations
//   c.assertNoSecret('s3cr3t-value');      // searches every recorded response body
//   await c.close();
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import net from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { ensureConsoleBuilt } from '../../../../scripts/build-web.ts';
import { freePort } from '../../src/db/embedded.ts';
import { type ConversationHarness, type HarnessOptions, startConversationHarness } from './conversations.ts';

export const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface RecordedResponse {
  method: string;
  path: string;
  /** The request's headers as the browser sent them. */
  requestHeaders: http.IncomingHttpHeaders;
  status: number;
  contentType: string;
  /** The body as the browser decoded it (content-encoding undone), as much as has arrived. */
  readonly body: Buffer;
}

export interface ConsoleHarness {
  /** The conversation harness behind the proxy (its API helpers use API keys directly). */
  h: ConversationHarness;
  /** The origin the browser uses (the recording proxy; PUBLIC_URL of the server). */
  origin: string;
  url(path: string): string;
  browser: Browser;
  /** A new page in a fresh context (own cookies), 1440×900 unless told. */
  page(viewport?: { width: number; height: number }): Promise<Page>;
  /** Every response the browser received so far, complete bodies (streams: what arrived). */
  responses(): RecordedResponse[];
  /** Asserts that `secret` appears in no response body the browser received. */
  assertNoSecret(secret: string): void;
  /** Runs axe-core on the page; fails listing every serious or critical violation. */
  axe(page: Page, label: string): Promise<void>;
  /**
   * Cuts every open SSE response between the browser and the server (a dropped connection):
   * the browser's EventSource reconnects by itself with Last-Event-ID.
   */
  dropStreams(): number;
  /** Content-Security-Policy violations and uncaught page errors seen so far. */
  pageProblems(): string[];
  close(): Promise<void>;
}

function decode(body: Buffer, encoding: string | undefined): Buffer {
  try {
    if (encoding === 'gzip') return gunzipSync(body, { finishFlush: 2 });
    if (encoding === 'br') return brotliDecompressSync(body);
  } catch {
    // A stream cut mid-member: keep the raw bytes (still searched).
  }
  return body;
}

/** A reverse proxy to `target` that keeps a copy of every response body it forwards. */
async function startRecordingProxy(target: string, port: number, record: (r: RecordedResponse) => void) {
  const upstream = new URL(target);
  const streams = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const proxied = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (up) => {
        // Recorded as soon as it starts (an SSE stream never ends while watched); the body
        // is decoded from what arrived so far whenever a test reads it.
        const chunks: Buffer[] = [];
        const encoding = up.headers['content-encoding'];
        record({
          method: req.method ?? 'GET',
          path: req.url ?? '/',
          requestHeaders: req.headers,
          status: up.statusCode ?? 0,
          contentType: String(up.headers['content-type'] ?? ''),
          get body() {
            return decode(Buffer.concat(chunks), encoding);
          },
        });
        if (String(up.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          streams.add(res);
          res.on('close', () => streams.delete(res));
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          res.write(chunk);
        });
        up.on('end', () => res.end());
        up.on('error', () => res.destroy());
      },
    );
    proxied.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    // The browser left (a reload mid-stream): stop the upstream request too.
    res.on('close', () => proxied.destroy());
    req.pipe(proxied);
  });
  // WebSocket upgrades (the terminal) are passed through as bytes, not recorded.
  const tunnels = new Set<net.Socket>();
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const up = net.connect(Number(upstream.port), upstream.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      up.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) up.write(head);
      socket.pipe(up).pipe(socket);
    });
    for (const end of [socket, up]) {
      tunnels.add(end);
      end.on('close', () => {
        tunnels.delete(end);
        socket.destroy();
        up.destroy();
      });
      end.on('error', () => end.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    dropStreams() {
      const n = streams.size;
      for (const res of streams) res.destroy();
      streams.clear();
      return n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        for (const socket of tunnels) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export async function startConsoleHarness(options: HarnessOptions = {}): Promise<ConsoleHarness> {
  await ensureConsoleBuilt();
  const proxyPort = await freePort();
  const origin = `http://127.0.0.1:${proxyPort}`;
  const serverPort = await freePort();
  const h = await startConversationHarness({
    ...options,
    port: serverPort,
    env: { PUBLIC_URL: origin, ...options.env },
  });
  const recorded: RecordedResponse[] = [];
  const problems: string[] = [];
  let proxy: Awaited<ReturnType<typeof startRecordingProxy>> | undefined;
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  try {
    proxy = await startRecordingProxy(h.url, proxyPort, (r) => recorded.push(r));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
  } catch (err) {
    await proxy?.close();
    await h.close();
    throw err;
  }
  const b = browser;
  return {
    h,
    origin,
    url: (path) => origin + path,
    browser: b,
    async page(viewport = { width: 1440, height: 900 }) {
      const context = await b.newContext({ viewport, baseURL: origin });
      contexts.push(context);
      const page = await context.newPage();
      page.on('console', (msg) => {
        if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text())) {
          problems.push(`CSP: ${msg.text()}`);
        }
      });
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      return page;
    },
    responses: () => [...recorded],
    assertNoSecret(secret) {
      const needle = Buffer.from(secret);
      for (const r of recorded) {
        assert.ok(
          !r.body.includes(needle),
          `a secret reached the browser in ${r.method} ${r.path} (${r.status} ${r.contentType})`,
        );
      }
    },
    async axe(page, label) {
      // Evaluated through the DevTools protocol: the page's CSP (script-src 'self') stays on.
      await page.evaluate(`${AXE_SOURCE};0`);
      const result = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] })`)) as {
        violations: { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[];
      };
      const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      assert.deepEqual(
        bad.map(
          (v) => `${v.impact} ${v.id}: ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
        ),
        [],
        `axe found serious/critical violations on ${label}`,
      );
    },
    dropStreams: () => proxy?.dropStreams() ?? 0,
    pageProblems: () => [...problems],
    async close() {
      for (const c of contexts) await c.close().catch(() => {});
      await b.close().catch(() => {});
      await proxy?.close();
      await h.close();
    },
  };
}
