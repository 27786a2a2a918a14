/**
 * One sandboxd per data directory. Two daemons on one directory would both adopt its sandboxes, start and
 * stop the same inits, and overwrite each other's records; the second is refused at start instead.
 *
 * Invariants:
 * - The holder of a data directory listens on an abstract unix socket named after the directory's real
 *   path (Linux's abstract namespace: no file, nothing to clean up). Binding is atomic: of two daemons
 *   starting at once exactly one gets it, and the kernel lets it go when the holder exits however it exits
 *   (kill -9 included), so there is never a stale lock to judge.
 * - The holder answers a connection with its pid, so the refusal names the daemon to stop.
 * - The socket is close-on-exec (node's default): no process sandboxd starts holds it.
 * - The name is scoped to the network namespace, like every abstract socket: the daemons of one host
 *   namespace (every root sandboxd) exclude each other.
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import net from 'node:net';

/** Takes the data directory for this process; resolves with the function that lets it go. */
export async function lockDataDir(dataDir: string): Promise<() => void> {
  const real = realpathSync(dataDir);
  const name = `\0paddock-sandboxd-${createHash('sha256').update(real).digest('hex').slice(0, 32)}`;
  const server = net.createServer((c) => {
    c.on('error', () => {});
    c.end(`${process.pid}\n`);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(name, () => resolve());
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    const holder = await holderPid(name);
    throw new Error(
      `another sandboxd${holder ? ` (pid ${holder})` : ''} is using the data directory ${real}; stop it first, or give this one its own SANDBOXD_DATA_DIR`,
    );
  }
  server.unref();
  return () => server.close();
}

/** The pid the holder answers with (null when it does not answer within a second). */
function holderPid(name: string): Promise<string | null> {
  return new Promise((resolve) => {
    let got = '';
    const c = net.connect(name);
    const done = () => {
      c.destroy();
      resolve(/^\d+$/.test(got.trim()) ? got.trim() : null);
    };
    c.setTimeout(1000, done);
    c.on('data', (d: Buffer) => {
      got += d.toString('utf8');
    });
    c.on('end', done);
    c.on('error', done);
  });
}
