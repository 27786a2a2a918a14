/**
 * Runs inside a sandbox's network namespace only (host mount namespace, spawned by sandboxd through
 * nsenter --net). It opens the sandbox's proxy listener on 127.0.0.1 and hands the listening socket to
 * sandboxd over the IPC channel, then exits: sandboxd accepts the sandbox's proxy connections itself.
 */
import net from 'node:net';

const port = Number(process.env['SBX_PROXY_PORT'] ?? '3128');
const server = net.createServer();
server.on('error', (err) => {
  process.stderr.write(`listen failed: ${err.message}\n`);
  process.exit(1);
});
server.listen({ host: '127.0.0.1', port }, () => {
  process.send?.('server', server, () => process.exit(0));
});
