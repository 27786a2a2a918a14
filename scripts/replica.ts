// `PORT=<port> npm run replica`: one more paddock-server joining the `npm start` that runs on the
// same data directory: its database (the embedded PostgreSQL it serves, or its DATABASE_URL), its
// sandboxd and token, its development master key. Replicas share everything through PostgreSQL
// (docs/operations.md): a conversation started on one streams and takes commands on the other,
// and the survivor adopts the conversations of one that dies. The replica stops with Ctrl-C; it
// never stops npm start's processes, and stops by itself when npm start's database goes away.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EmbeddedPostgresError, startEmbeddedPostgres } from '../apps/server/src/db/embedded.ts';
import { SERVER_NODE_FLAGS } from '../apps/server/src/node-flags.ts';
import { STACK_FILE, type StackFile } from './stack-file.ts';

const root = resolve(import.meta.dirname, '..');
const env: NodeJS.ProcessEnv = { ...process.env };
const blank = (name: string) => (env[name] ?? '').trim() === '';
const dataDir = resolve(blank('PADDOCK_DATA_DIR') ? join(root, '.paddock') : env['PADDOCK_DATA_DIR']!);
env['PADDOCK_DATA_DIR'] = dataDir;

function refuse(message: string): never {
  console.error(`paddock replica: ${message}`);
  process.exit(1);
}

const running = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

let stack: StackFile | null = null;
try {
  stack = JSON.parse(readFileSync(join(dataDir, STACK_FILE), 'utf8')) as StackFile;
} catch {
  stack = null;
}
if (!stack || !running(stack.pid))
  refuse(
    `no npm start runs on ${dataDir}: start it first (npm start), and give the replica the same PADDOCK_DATA_DIR`,
  );

const port = Number(env['PORT']);
if (blank('PORT') || !Number.isInteger(port) || port <= 0 || port > 65535)
  refuse('PORT: set the port this replica listens on (e.g. PORT=4001 npm run replica)');
if (port === stack.server_port) refuse(`PORT: ${port} is npm start's own server; pick another port`);

if (stack.sandbox_base_url) {
  const tokenFile = join(dataDir, 'sandboxd.token');
  if (!existsSync(tokenFile)) refuse(`${tokenFile} is missing: restart npm start`);
  env['SANDBOX_BASE_URL'] = stack.sandbox_base_url;
  env['SANDBOX_TOKEN'] = readFileSync(tokenFile, 'utf8').trim();
}
// Sandboxes call back to npm start's server (any replica answers the same), and the replica
// refuses the same gateway URLs as the stack's server.
if (stack.sandbox_callback_url && blank('SANDBOX_CALLBACK_URL'))
  env['SANDBOX_CALLBACK_URL'] = stack.sandbox_callback_url;
if (stack.sandboxd_service_routes) env['SANDBOXD_SERVICE_ROUTES'] = stack.sandboxd_service_routes;
if (blank('EMAIL_DELIVERY') && blank('SMTP_HOST') && blank('EMAIL_PROVIDER_API_KEY'))
  env['EMAIL_DELIVERY'] = 'none';

if (blank('DATABASE_URL')) {
  try {
    const database = await startEmbeddedPostgres({ dataDir, attach: true });
    if (!database.attached) {
      await database.stop();
      refuse(`npm start's embedded PostgreSQL in ${dataDir} is not running; restart npm start`);
    }
    env['DATABASE_URL'] = database.url;
    env['DATABASE_SSL'] = 'false';
  } catch (err) {
    if (err instanceof EmbeddedPostgresError) refuse(err.message);
    throw err;
  }
}

console.error(
  `paddock replica: joining npm start's stack on ${dataDir} (its server on port ${stack.server_port}); this replica listens on port ${port}`,
);
const server = spawn(
  process.execPath,
  [...SERVER_NODE_FLAGS, join(root, 'apps/server/src/main.ts'), 'serve'],
  {
    cwd: root,
    stdio: 'inherit',
    env,
  },
);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
  process.on(signal, () => server.kill('SIGTERM'));
const code = await new Promise<number>((r) => server.on('exit', (c) => r(c ?? 1)));
process.exit(code);
