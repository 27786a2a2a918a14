// `npm run dev:web`: the console with hot reload. Starts the whole stack (`npm start`:
// database, sandboxd, server on PORT, default 4000) and Vite's dev server on
// http://localhost:5173, which serves the console's sources and proxies every server route
// (/api, /auth, /health, /llms.txt, /skill, …) to the server (apps/web/vite.config.ts).
// Ctrl-C stops both.
import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const port = (process.env['PORT'] ?? '').trim() || '4000';
const children: ChildProcess[] = [];

const server = spawn(process.execPath, [join(root, 'scripts/dev-start.ts')], {
  cwd: root,
  stdio: 'inherit',
  detached: true,
  env: { ...process.env, PORT: port },
});
children.push(server);
const vite = spawn(process.execPath, [join(root, 'node_modules/vite/bin/vite.js'), '--host', '127.0.0.1'], {
  cwd: join(root, 'apps/web'),
  stdio: 'inherit',
  detached: true,
  env: { ...process.env, PADDOCK_DEV_API: `http://127.0.0.1:${port}` },
});
children.push(vite);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  vite.kill('SIGTERM');
  server.kill('SIGTERM');
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
for (const child of children) child.on('exit', stop);
await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.on('exit', r)))));
process.exit(server.exitCode ?? 0);
