/**
 * A stand-in for "another machine on a private network", for the egress tests: a network namespace joined to
 * the host by a veth pair. sandboxd's proxy refuses loopback and the host's own addresses, so a test upstream
 * must live behind an address that is neither; the private range it uses is opened with
 * SANDBOXD_EGRESS_ALLOW_CIDRS (`allowEnv`).
 *
 *   host end  (an address of this host: always refused)   10.X.Y.1/29   fdXX:XXXX:XXXX:XXXX::1/64
 *   far end   (the upstream, `ip` / `ip6`)                 10.X.Y.2      …::2
 *   far end, second address (`otherIp` / `otherIp6`)       10.X.Y.6      …::6
 *   allowEnv opens 10.X.Y.0/30 and …::/126: `ip` and the host end, not `otherIp` (a private address that
 *   stays refused), and not the host end (an address of this host stays refused inside an opened range).
 *
 * A helper node process (`unshare --net`) holds the namespace and opens listening sockets in it on request;
 * they are handed to this process over IPC, so the test's own servers accept the connections. The helper
 * exits when this process goes away, and the namespace and the veth pair go with it. Needs root.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type net from 'node:net';

const HELPER_JS = `'use strict';
const net = require('node:net');
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  const server = net.createServer();
  server.on('error', (err) => process.send({ id: m.id, error: err.message }));
  server.listen({ host: m.host, port: m.port || 0, ipv6Only: m.host.includes(':') }, () => {
    // The helper's copy must go once sent, or it would accept (and hang) half of the connections.
    process.send({ id: m.id, port: server.address().port }, server, () => server.close());
  });
});
process.send({ ready: true });
`;

export interface TestNet {
  /** The upstream's addresses (far end). */
  ip: string;
  ip6: string;
  /** Second far-end addresses, private and not opened by allowEnv. */
  otherIp: string;
  otherIp6: string;
  /** The host end of the veth pair: addresses of this host. */
  hostIp: string;
  hostIp6: string;
  /** The host-side interface name. */
  hostIf: string;
  /** SANDBOXD_EGRESS_ALLOW_CIDRS for these addresses. */
  allowEnv: string;
  /** A listening socket inside the namespace, on `host` (default `ip`) and `port` (default: any free). */
  listen(host?: string, port?: number): Promise<{ server: net.Server; port: number }>;
  close(): void;
}

function ip(args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export async function createTestNet(): Promise<TestNet> {
  const tag = randomBytes(3).toString('hex');
  const [x, y] = [...randomBytes(2)];
  const v4 = `10.${x}.${(y ?? 0) & 0xf8}`;
  const v6 = `fd${randomBytes(1).toString('hex')}:${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}:${tag.slice(0, 4)}`;
  const hostIf = `pdk${tag}h`;
  const farIf = `pdk${tag}n`;
  const helper: ChildProcess = spawn('unshare', ['--net', '--', process.execPath, '-e', HELPER_JS], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const servers: net.Server[] = [];
  const waiting = new Map<number, (m: { port?: number; error?: string }, h: unknown) => void>();
  let seq = 0;
  await new Promise<void>((resolve, reject) => {
    helper.once('error', reject);
    helper.once('exit', (code) => reject(new Error(`netns helper exited (${code})`)));
    helper.once('message', () => resolve());
  });
  helper.removeAllListeners('exit');
  helper.on('message', (m: { id?: number; port?: number; error?: string }, handle: unknown) => {
    if (m.id !== undefined) waiting.get(m.id)?.(m, handle);
  });
  const close = () => {
    for (const s of servers) s.close();
    helper.kill('SIGKILL');
    try {
      ip(['link', 'del', hostIf]);
    } catch {}
  };
  try {
    const inNs = (args: string[]) =>
      execFileSync('nsenter', [`--net=/proc/${helper.pid}/ns/net`, '--', 'ip', ...args], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
    ip(['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', farIf, 'netns', String(helper.pid)]);
    ip(['addr', 'add', `${v4}.1/29`, 'dev', hostIf]);
    ip(['-6', 'addr', 'add', `${v6}::1/64`, 'dev', hostIf, 'nodad']);
    ip(['link', 'set', hostIf, 'up']);
    inNs(['link', 'set', 'lo', 'up']);
    inNs(['addr', 'add', `${v4}.2/29`, 'dev', farIf]);
    inNs(['addr', 'add', `${v4}.6/29`, 'dev', farIf]);
    inNs(['-6', 'addr', 'add', `${v6}::2/64`, 'dev', farIf, 'nodad']);
    inNs(['-6', 'addr', 'add', `${v6}::6/64`, 'dev', farIf, 'nodad']);
    inNs(['link', 'set', farIf, 'up']);
  } catch (err) {
    close();
    throw err;
  }
  return {
    ip: `${v4}.2`,
    ip6: `${v6}::2`,
    otherIp: `${v4}.6`,
    otherIp6: `${v6}::6`,
    hostIp: `${v4}.1`,
    hostIp6: `${v6}::1`,
    hostIf,
    allowEnv: `${v4}.0/30,${v6}::/126`,
    listen(host = `${v4}.2`, port = 0) {
      const id = seq++;
      return new Promise((resolve, reject) => {
        waiting.set(id, (m, handle) => {
          waiting.delete(id);
          if (m.error || !handle) reject(new Error(`listen in the test namespace failed: ${m.error}`));
          else {
            servers.push(handle as net.Server);
            resolve({ server: handle as net.Server, port: m.port ?? 0 });
          }
        });
        helper.send({ id, host, port });
      });
    },
    close,
  };
}
