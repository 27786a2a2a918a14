/** `npm run sandboxd`: configuration from the environment (see docs/sandboxd.md), then serve. */
import { ConfigError, loadConfig } from './config.ts';
import { startSandboxd } from './index.ts';
import { createLogger } from './log.ts';
import { closeInheritedFds } from './runtime/host-tools.ts';

// Before anything is spawned: nothing sandboxd's parent left open may reach a sandbox.
const inherited = closeInheritedFds();

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`sandboxd: ${err.message}\n`);
    process.exit(2);
  }
  throw err;
}
if (process.platform !== 'linux') {
  process.stderr.write('sandboxd: Linux is required (namespaces, overlayfs, cgroups)\n');
  process.exit(2);
}
const pretty =
  config.logFormat === 'pretty' || (config.logFormat === 'auto' && process.stderr.isTTY === true);
const log = createLogger(config.logLevel, process.stderr, pretty ? 'pretty' : 'json');
if (inherited.length > 0) log.debug('closed inherited file descriptors', { fds: inherited });
const running = await startSandboxd({ ...config, logger: log, installEnv: process.env }).catch(
  (err: unknown) => {
    log.error('sandboxd failed to start', { err });
    process.stderr.write(`sandboxd: cannot start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
// Consumed by test/harness.ts to learn the bound address (port 0 picks a free port).
process.stdout.write(`${JSON.stringify({ ready: true, url: running.url })}\n`);
let stopping = false;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    log.info('sandboxd stopping', { signal: sig });
    void running.close().then(() => process.exit(0));
  });
}
