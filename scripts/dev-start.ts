// `npm start`: the whole development stack with no other setup.
//   - the local sandbox backend (sandboxd) as its own process, with a generated token,
//     unless SANDBOX_BASE_URL points at another backend; sandboxes reach the server back at
//     http://paddock.internal:<PORT> (SANDBOX_CALLBACK_URL, SANDBOXD_SERVICE_ROUTES: the
//     operator's own routes, a local model gateway's say, are kept beside it, and the server
//     reads the same list to refuse a gateway base URL no sandbox can reach);
//   - the web console's build (apps/web/dist), made when missing or stale;
//   - paddock-server, which starts the embedded PostgreSQL (DATABASE_URL unset), runs
//     migrations and prints its URL.
// Ctrl-C / SIGTERM / SIGHUP (the terminal closed) stops the server first (it drains, then stops
// its database), then sandboxd. A server that stops on its own (killed, crashed) is started
// again while sandboxd and the sandboxes' running turns stay up (after SERVER_RESTARTS within a
// minute npm start stops). A sandboxd that stops on its own meanwhile (killed, crashed) is
// started again on the same address and token: its sandboxes and their running turns survive a
// restart (docs/sandboxd.md); after SANDBOXD_RESTARTS restarts within a minute it stays down,
// saying so. Children run in their own process groups so a terminal's
// Ctrl-C reaches only this script, which then stops them in that order. Should this script die
// without doing so (kill -9, out of memory), each child gets SIGTERM from the kernel
// (`setpriv --pdeathsig`) and stops on its own: nothing keeps running unseen, holding the port
// and the data directory.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { parseServiceRoutes } from '../apps/server/src/config/sandbox-reach.ts';
import { SERVER_NODE_FLAGS } from '../apps/server/src/node-flags.ts';
import { ensureConsoleBuilt } from './build-web.ts';
import { STACK_FILE } from './stack-file.ts';

const root = resolve(import.meta.dirname, '..');
const env: NodeJS.ProcessEnv = { ...process.env };
const blank = (name: string) => (env[name] ?? '').trim() === '';
const dataDir = resolve(blank('PADDOCK_DATA_DIR') ? join(root, '.paddock') : env['PADDOCK_DATA_DIR']!);
env['PADDOCK_DATA_DIR'] = dataDir;
mkdirSync(dataDir, { recursive: true, mode: 0o700 });
if (blank('EMAIL_DELIVERY') && blank('SMTP_HOST') && blank('EMAIL_PROVIDER_API_KEY'))
  env['EMAIL_DELIVERY'] = 'none';

const children: ChildProcess[] = [];
let stopping = false;

/** `setpriv --pdeathsig TERM --` where util-linux's setpriv has it (Linux), else nothing. */
const LIFELINE = ((): string[] => {
  const argv = ['setpriv', '--pdeathsig', 'TERM', '--'];
  const probe = spawnSync(argv[0]!, [...argv.slice(1), 'true'], { stdio: 'ignore' });
  return probe.status === 0 ? argv : [];
})();

/** Spawns `node args…` as a child that stops when this script dies, however it dies. */
function spawnNode(args: string[], options: Parameters<typeof spawn>[2]): ChildProcess {
  const [command, ...rest] = [...LIFELINE, process.execPath, ...args];
  return spawn(command!, rest, options);
}

function persistentSecret(file: string): string {
  const path = join(dataDir, file);
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  const value = randomBytes(32).toString('base64url');
  writeFileSync(path, `${value}\n`, { mode: 0o600 });
  return value;
}

async function freePort(preferred: number): Promise<number> {
  const tryPort = (port: number) =>
    new Promise<number>((ok, fail) => {
      const srv = createServer();
      srv.once('error', fail);
      srv.listen(port, '127.0.0.1', () => {
        const a = srv.address();
        srv.close(() => ok(typeof a === 'object' && a ? a.port : port));
      });
    });
  return await tryPort(preferred).catch(() => tryPort(0));
}

async function waitForHttp(url: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      // A loaded machine may take seconds to answer a process that is already listening: each try
      // may use what is left of the deadline (up to 5 s), not a fixed second.
      const left = Math.max(1000, Math.min(5000, deadline - Date.now()));
      const res = await fetch(url, { signal: AbortSignal.timeout(left) });
      if (res.status < 500) return true;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

// The server's port (its config default is 4000): sandboxd routes paddock.internal to it.
const serverPort = Number(blank('PORT') ? '4000' : env['PORT']);

/**
 * SANDBOXD_SERVICE_ROUTES for sandboxd and the server: the operator's entries (a model gateway on
 * this host, say) and this stack's `paddock.internal`, the one name and port the egress proxy
 * dials on loopback for the callback (docs/sandboxd.md "Service routes"). An operator's own
 * `paddock.internal` entry is kept as written. A malformed value stops the stack here, naming the
 * variable, as sandboxd and the server would.
 */
function serviceRoutes(): string {
  let declared: string[] = [];
  try {
    declared = blank('SANDBOXD_SERVICE_ROUTES')
      ? []
      : parseServiceRoutes(env['SANDBOXD_SERVICE_ROUTES'] ?? '').map(
          (r) => `${r.name}=${r.ip.includes(':') ? `[${r.ip}]` : r.ip}:${r.port}`,
        );
  } catch (err) {
    console.error(`paddock: SANDBOXD_SERVICE_ROUTES: ${(err as Error).message}`);
    process.exit(1);
  }
  const own = declared.some((entry) => entry.startsWith('paddock.internal='))
    ? []
    : [`paddock.internal=127.0.0.1:${serverPort}`];
  return [...own, ...declared].join(',');
}

/** Restarts of a sandboxd that stopped on its own, within a minute, before it is left down. */
const SANDBOXD_RESTARTS = 3;
const restartedAt: number[] = [];
/** sandboxd served once: one that never came up (no privileges, say) is not started again. */
let sandboxdServed = false;

/** Starts sandboxd as a child; one that ends while the stack runs is started again (see the top). */
function launchSandboxd(main: string, port: number, token: string): ChildProcess {
  const child = spawnNode([main], {
    cwd: root,
    // Its stdout carries only the machine-readable ready line (for tests); logs go to stderr.
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
    env: {
      ...env,
      SANDBOXD_ADDR: `127.0.0.1:${port}`,
      SANDBOXD_TOKEN: token,
      SANDBOXD_DATA_DIR: join(dataDir, 'sandboxd'),
      ...(blank('SANDBOXD_LOG_FORMAT') && !blank('LOG_FORMAT')
        ? { SANDBOXD_LOG_FORMAT: env['LOG_FORMAT'] }
        : {}),
    },
  });
  child.once('exit', (code, signal) => {
    if (stopping || !sandboxdServed) return;
    const why = signal ?? `exit code ${code}`;
    const now = Date.now();
    while (restartedAt.length > 0 && now - (restartedAt[0] ?? 0) > 60_000) restartedAt.shift();
    if (restartedAt.length >= SANDBOXD_RESTARTS) {
      console.error(
        `paddock: sandboxd stopped again (${why}); not starting it a ${SANDBOXD_RESTARTS + 1}th time within a minute: conversations fail until npm start is restarted (its reason is above)`,
      );
      return;
    }
    restartedAt.push(now);
    console.error(
      `paddock: sandboxd stopped (${why}); starting it again on the same address (its sandboxes and running turns survive)`,
    );
    const next = launchSandboxd(main, port, token);
    children[children.indexOf(child)] = next;
  });
  return child;
}

async function startSandboxd(): Promise<void> {
  const main = join(root, 'apps/sandboxd/src/main.ts');
  if (!existsSync(main)) return;
  const token = persistentSecret('sandboxd.token');
  env['SANDBOXD_SERVICE_ROUTES'] = serviceRoutes();
  const port = await freePort(7070);
  const child = launchSandboxd(main, port, token);
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  const up = await Promise.race([
    waitForHttp(`${url}/v1/sandboxes`, 60_000),
    new Promise<boolean>((r) => child.once('exit', () => r(false))),
  ]);
  if (!up) {
    console.error(
      'paddock: sandboxd did not start (its reason is above: it needs root or unprivileged user namespaces, and a data directory no other sandboxd uses); conversations will fail until SANDBOX_BASE_URL points at a backend.',
    );
    return;
  }
  sandboxdServed = true;
  env['SANDBOX_BASE_URL'] = url;
  env['SANDBOX_TOKEN'] = token;
  if (blank('SANDBOX_CALLBACK_URL')) env['SANDBOX_CALLBACK_URL'] = `http://paddock.internal:${serverPort}`;
  console.error(`paddock: sandboxd is serving the sandbox interface on ${url}`);
}

if (blank('SANDBOX_BASE_URL')) await startSandboxd();

// What `npm run replica` needs to join this stack (scripts/replica.ts): written once the
// settings are known, removed when the stack stops. It holds no secret: the sandboxd token stays
// in its own file.
const stackFile = join(dataDir, STACK_FILE);
writeFileSync(
  stackFile,
  `${JSON.stringify({
    pid: process.pid,
    server_port: serverPort,
    sandbox_base_url: sandboxdServed ? env['SANDBOX_BASE_URL'] : null,
    sandbox_callback_url: env['SANDBOX_CALLBACK_URL'] ?? null,
    sandboxd_service_routes: env['SANDBOXD_SERVICE_ROUTES'] ?? null,
  })}\n`,
  { mode: 0o600 },
);
process.on('exit', () => rmSync(stackFile, { force: true }));

// The console is served from its build: make one when it is missing or its sources changed
// (progress on stderr). A failed build leaves the API up; the console's page says what to run.
// No type check here (8 s of a first start on two cores): `npm run typecheck` and
// `npm run build:web` do it.
try {
  await ensureConsoleBuilt({ typeCheck: false });
} catch (err) {
  console.error(
    `paddock: the web console could not be built (${err instanceof Error ? err.message : String(err)}); the API still starts. Fix it and run npm run build:web.`,
  );
}

/** Restarts of a server that stopped on its own, within a minute, before npm start gives up. */
const SERVER_RESTARTS = 3;
const serverRestartedAt: number[] = [];
/** The server's exit code when it refuses its configuration (EX_CONFIG): starting it again cannot help. */
const EX_CONFIG = 78;

function launchServer(): ChildProcess {
  const child = spawnNode([...SERVER_NODE_FLAGS, join(root, 'apps/server/src/main.ts'), 'serve'], {
    cwd: root,
    stdio: 'inherit',
    detached: true,
    env,
  });
  children.unshift(child);
  return child;
}

/**
 * Resolves with the exit code npm start ends with: the server's, once it stops because npm start
 * was told to stop, refused its configuration, or stopped on its own SERVER_RESTARTS times
 * within a minute. Any other end (killed, crashed) starts it again with the same settings;
 * sandboxd and the sandboxes' running turns stay up meanwhile, and the new server re-joins them.
 */
async function superviseServer(): Promise<number> {
  for (;;) {
    server = launchServer();
    const current = server;
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) =>
      current.once('exit', (c, sig) => r([c, sig])),
    );
    children.splice(children.indexOf(current), 1);
    if (stopping || code === EX_CONFIG || code === 0) return code ?? 1;
    const why = signal ?? `exit code ${code}`;
    const now = Date.now();
    while (serverRestartedAt.length > 0 && now - (serverRestartedAt[0] ?? 0) > 60_000)
      serverRestartedAt.shift();
    if (serverRestartedAt.length >= SERVER_RESTARTS) {
      console.error(
        `paddock: the server stopped again (${why}); not starting it a ${SERVER_RESTARTS + 1}th time within a minute (its reason is above)`,
      );
      return code ?? 1;
    }
    serverRestartedAt.push(now);
    console.error(
      `paddock: the server stopped (${why}); starting it again (sandboxd and the sandboxes' running turns stay up)`,
    );
  }
}

let server: ChildProcess | undefined;
const stop = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  server?.kill(signal);
};
process.on('SIGINT', () => stop('SIGTERM'));
process.on('SIGTERM', () => stop('SIGTERM'));
// The terminal closed (or the SSH session dropped): stop as for Ctrl-C, never leave the stack
// running without a terminal.
process.on('SIGHUP', () => stop('SIGTERM'));

process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

const code = await superviseServer();
stopping = true;
await Promise.all(
  children.map(
    (child) =>
      new Promise<void>((r) => {
        if (child.exitCode !== null || child.signalCode !== null) return r();
        child.once('exit', () => r());
        child.kill('SIGTERM');
      }),
  ),
);
process.exit(code);
