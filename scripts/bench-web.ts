// `npm run bench -- web`: the console's two budgets (issue 11), measured in real headless
// Chromium against the production build (apps/web/dist):
//   1. first-load JavaScript, gzipped: every script the browser fetched to show the landing
//      page signed out (home) and signed in (dashboard) — goal < 300 KB;
//   2. the longest main-thread task while a conversation's 10,000-line ANSI log arrives over
//      SSE, renders and is scrolled from end to start and back — goal < 200 ms.
// The build is served by a small static server that answers the few API calls these pages
// make with fixed data in the API's own shapes, and the stream in the SSE wire format
// (docs/api.md): the bench measures the browser, not the server.
//   npm run bench -- web [--lines 10000]
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism, loadavg } from 'node:os';
import { extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { ensureConsoleBuilt, WEB_DIR } from './build-web.ts';

const argLines = process.argv.indexOf('--lines');
const LINES = argLines === -1 ? 10_000 : Number(process.argv[argLines + 1]);
const DIST = join(WEB_DIR, 'dist');
const ID = '01a20000-0000-7000-8000-000000000001';
const TURN = '01a20000-0000-7000-8000-000000000002';
const AGENT = '01a20000-0000-7000-8000-000000000003';
const now = new Date().toISOString();

await ensureConsoleBuilt();

const me = {
  id: '01a20000-0000-7000-8000-000000000004',
  email: 'bench@example.com',
  email_verified: true,
  is_admin: false,
  suspended: false,
  created_at: now,
  has_password: true,
  subscription_status: null,
  auth: { via: 'session', scope: 'full' },
};
const conversation = {
  id: ID,
  agent_id: AGENT,
  vault_id: null,
  status: 'idle',
  source: 'ui',
  parent_conversation_id: null,
  title: 'Run the whole test suite',
  unread: false,
  failure_reason: null,
  sandbox: {
    name: 'paddock-bench',
    status: 'ready',
    reason: null,
    created_at: now,
    expires_at: null,
    idle_expires_at: null,
  },
  created_at: now,
  updated_at: now,
  last_activity_at: now,
};
const turn = {
  id: TURN,
  seq: 1,
  status: 'succeeded',
  prompt: 'npm test',
  runtime_session_id: null,
  exit_code: 0,
  error: null,
  usage: { input_tokens: 1200, output_tokens: 3400 },
  created_at: now,
  started_at: now,
  ended_at: now,
};
const agent = {
  id: AGENT,
  name: 'bench-agent',
  runtime: 'claude',
  model: 'anthropic/claude-sonnet-4-5',
  vault_ids: [],
};

/** 10,000 lines of coloured test-runner output, coalesced into ~32 KiB events as the server does. */
function streamBody(): string {
  const out: string[] = ['retry: 2000\n\n'];
  let id = 1;
  const event = (payload: Record<string, unknown>) => {
    out.push(
      `id: ${id}\nevent: ${payload['stream']}\ndata: ${JSON.stringify({ id: String(id), ...payload })}\n\n`,
    );
    id++;
  };
  event({
    stream: 'stage',
    stage: 'turn',
    state: 'started',
    duration_ms: null,
    message: null,
    turn_id: TURN,
    created_at: now,
  });
  let chunk = '';
  for (let i = 1; i <= LINES; i++) {
    chunk +=
      i % 7 === 0
        ? `\x1b[31m✖\x1b[0m test ${i} \x1b[2m(${i % 97} ms)\x1b[0m expected \x1b[1;33m${i}\x1b[0m to equal ${i + 1}\n`
        : `\x1b[32m✔\x1b[0m suite ${Math.floor(i / 50)} › test ${i} passes \x1b[90m(${i % 13} ms)\x1b[0m\n`;
    if (chunk.length > 32_000) {
      event({ stream: 'stdout', turn_id: TURN, created_at: now, text: chunk });
      chunk = '';
    }
  }
  if (chunk) event({ stream: 'stdout', turn_id: TURN, created_at: now, text: chunk });
  event({
    stream: 'stage',
    stage: 'turn',
    state: 'done',
    duration_ms: 61_000,
    message: null,
    turn_id: TURN,
    created_at: now,
  });
  return out.join('');
}
const STREAM = streamBody();

const TYPES: Record<string, string> = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.svg': 'image/svg+xml',
};
let signedIn = false;
const server = http.createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0]!;
  const json = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  if (path === '/api/auth/me')
    return signedIn
      ? json(200, me)
      : json(401, { error: 'unauthorized', message: 'authentication required' });
  if (path === '/api/site')
    return json(200, {
      billing: { enabled: false, price_monthly_cents: null },
      legal: false,
      registration_enabled: true,
    });
  if (path === '/api/auth/providers')
    return json(200, { password: true, oauth: [], registration_enabled: true });
  if (path === '/api/agents') return json(200, { data: [agent] });
  if (path === `/api/agents/${AGENT}`) return json(200, agent);
  if (path === '/api/conversations')
    return json(200, {
      // The conversation page asks for its sub-conversations: it has none.
      data: (req.url ?? '').includes('parent_id=') ? [] : [conversation],
      meta: { next_cursor: null, has_more: false },
    });
  if (path === `/api/conversations/${ID}`) return json(200, conversation);
  if (path === `/api/conversations/${ID}/turns`) return json(200, { data: [turn] });
  if (path === `/api/conversations/${ID}/stream`) {
    // Resumes after Last-Event-ID like the server; then stays open (heartbeats are not needed here).
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    if (!req.headers['last-event-id'] && !(req.url ?? '').includes('after=')) res.write(STREAM);
    return;
  }
  if (path.startsWith('/api/')) return json(404, { error: 'not_found', message: 'not found' });
  const file = extname(path) ? join(DIST, path) : join(DIST, 'index.html');
  try {
    const body = readFileSync(file);
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const address = server.address();
const origin = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  /** gzip bytes of every script the page fetched while loading `path`. */
  const firstLoad = async (path: string, ready: string) => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    const scripts = new Set<string>();
    page.on('request', (r) => {
      if (r.resourceType() === 'script') scripts.add(new URL(r.url()).pathname);
    });
    await page.goto(origin + path);
    await page.getByRole('heading', { name: ready }).first().waitFor();
    await page.waitForLoadState('networkidle');
    await context.close();
    let gz = 0;
    let raw = 0;
    for (const s of scripts) {
      const body = readFileSync(join(DIST, s));
      raw += body.length;
      gz += gzipSync(body, { level: 9 }).length;
    }
    return { files: scripts.size, raw, gz };
  };
  const home = await firstLoad('/', 'Run AI coding agents in isolated sandboxes');
  signedIn = true;
  const dashboard = await firstLoad('/', 'Conversations');
  const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
  console.log(
    `first-load JS, home (signed out):   ${kb(home.gz)} gzipped (${kb(home.raw)} raw, ${home.files} files)`,
  );
  console.log(
    `first-load JS, dashboard (signed in): ${kb(dashboard.gz)} gzipped (${kb(dashboard.raw)} raw, ${dashboard.files} files)`,
  );
  const worstLoad = Math.max(home.gz, dashboard.gz);
  console.log(`  budget 300 KB: ${worstLoad < 300 * 1024 ? 'within' : 'OVER'}`);

  // The log: load the conversation (10,000 lines over SSE), then scroll end → start → end.
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  // Runs in the page (a string: this file is type-checked for Node, not the DOM).
  await page.addInitScript(`
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push(e.duration);
    }).observe({ type: 'longtask', buffered: true });
  `);
  const started = performance.now();
  await page.goto(`${origin}/conversations/${ID}`);
  await page.getByRole('tab', { name: 'Raw output' }).click();
  const lastLine = LINES % 7 === 0 ? `test ${LINES}` : `test ${LINES} passes`;
  await page.locator('#panel-raw .term-line', { hasText: lastLine }).waitFor({ timeout: 60_000 });
  const loadedMs = performance.now() - started;
  const loadTasks = (await page.evaluate('window.__longTasks.splice(0)')) as number[];
  const scroll = (await page.evaluate(`(async () => {
    const el = document.querySelector('#panel-raw .term');
    const frames = [];
    const step = async (to) => {
      el.scrollTop = to;
      const t0 = performance.now();
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      frames.push(performance.now() - t0);
    };
    const max = el.scrollHeight;
    for (let y = max; y >= 0; y -= 2000) await step(y);
    for (let y = 0; y <= max; y += 2000) await step(y);
    await step(0);
    await step(max);
    return { frames, lines: document.querySelectorAll('#panel-raw .term-line').length };
  })()`)) as { frames: number[]; lines: number };
  const scrollTasks = (await page.evaluate('window.__longTasks.splice(0)')) as number[];
  await context.close();
  const maxOf = (xs: number[]) => (xs.length ? Math.max(...xs) : 0);
  console.log(
    `log of ${LINES.toLocaleString()} lines: shown in ${Math.round(loadedMs)} ms; longest task while loading ${Math.round(maxOf(loadTasks))} ms (${loadTasks.length} over 50 ms)`,
  );
  console.log(
    `scrolling it (${scroll.frames.length} jumps of 100 lines, end → start → end): longest task ${Math.round(maxOf(scrollTasks))} ms (${scrollTasks.length} over 50 ms); slowest frame ${Math.round(maxOf(scroll.frames))} ms; ${scroll.lines} line elements in the DOM`,
  );
  const worstTask = Math.max(maxOf(loadTasks), maxOf(scrollTasks));
  console.log(`  budget 200 ms: ${worstTask < 200 ? 'within' : 'OVER'}`);
  // Long tasks are wall-clock: on a shared machine they include time the page waited for a CPU.
  console.log(
    `  (machine load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} CPUs during the run)`,
  );
} finally {
  await browser.close();
  server.closeAllConnections();
  server.close();
}
