// The Node.js flags the server process runs with (scripts/dev-start.ts, bin/paddock-server.mjs's
// shebang, `npm run paddock-server` in package.json, and `npm run bench`, whose benchmarks host the
// server in their own process).
//
// --max-semi-space-size=32 (MiB; Node's default grows to 16): a conversation's output passes
// through the server as short-lived buffers and strings (a log batch, its SSE frames, the
// redactor's views). With the default young generation, a busy stream promotes many of them
// before they die, and old-generation collections (whose marking runs on V8's helper threads,
// taking CPU from PostgreSQL and the event loop on a small machine) follow every few hundred
// milliseconds. Measured with `npm run bench -- conversations-log` (10 viewers, 32 MB):
// 0.46–0.51× the INSERT ceiling without the flag, 0.59–0.61× with it (docs/performance.md).
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
