/**
 * A stand-in for "another machine on a private network", for the egress tests: a network namespace joined to
 * sandboxd's host by a veth pair. sandboxd's proxy refuses loopback and the host's own addresses, so a test
 * upstream must live behind an address that is neither; the private range it uses is opened with
 * SANDBOXD_EGRESS_ALLOW_CIDRS (`allowEnv`).
 *
 *   host end  (an address of this host: always refused)   10.X.Y.1/29   fdXX:XXXX:XXXX:XXXX::1/64
 *   far end   (the upstream, `ip` / `ip6`)                 10.X.Y.2      …::2
 *   far end, second address (`otherIp` / `otherIp6`)       10.X.Y.6      …::6
 *   allowEnv opens 10.X.Y.0/30 and …::/126: `ip` and the host end, not `otherIp` (a private address that
 *   stays refused), and not the host end (an address of this host stays refused inside an opened range).
 *
 * "The host" is the network namespace sandboxd runs in:
 * - as root, this process's own: the veth pair's host end is added to the machine for the test's duration;
 * - as any other user (no address can be added to the machine), a network namespace of a user namespace this
 *   test creates and owns (`unshare --user --map-root-user --net`), with its own loopback and the host end.
 *   startTestSandboxd({ net }) then runs sandboxd there, still unprivileged: `sandboxdPrefix` enters that
 *   namespace and maps the caller's uid to itself, so sandboxd sees an ordinary uid and runs rootless,
 *   exactly as on the machine. Its API listener (127.0.0.1 of that namespace) is reached through a forwarder
 *   the harness opens on this process's loopback. Everything the tests prove about "the host's addresses"
 *   they prove about that namespace's addresses (`hostAddresses`, `hostListen`, `hostConnect`, `hostIpCmd`).
 *
 * Helper node processes hold the namespaces and open sockets in them on request (a listening socket, a
 * connection, or the list of addresses); sockets are handed to this process over IPC, so the test's own
 * servers accept the connections. The helpers exit when this process goes away, and the namespaces and the
 * veth pair go with them.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import { hostBin } from './host-bin.ts';

const HELPER_JS = `'use strict';
const net = require('node:net');
const os = require('node:os');
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  if (m.op === 'addresses') {
    const all = Object.values(os.networkInterfaces()).flat().map((i) => i.address);
    process.send({ id: m.id, addresses: all });
  } else if (m.op === 'connect') {
    const s = net.connect({ host: m.host, port: m.port });
    s.once('error', (err) => process.send({ id: m.id, error: err.message }));
    // Sent before a byte is read (the servers here speak only when spoken to); the helper's copy is closed.
    s.once('connect', () => process.send({ id: m.id }, s));
  } else {
    const server = net.createServer();
    server.on('error', (err) => process.send({ id: m.id, error: err.message }));
    server.listen({ host: m.host, port: m.port || 0, ipv6Only: m.host.includes(':') && m.host !== '::' }, () => {
      // The helper's copy must go once sent, or it would accept (and hang) half of the connections.
      process.send({ id: m.id, port: server.address().port }, server, () => server.close());
    });
  }
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
  /** The host end of the veth pair: addresses of sandboxd's host. */
  hostIp: string;
  hostIp6: string;
  /** The host-side interface name. */
  hostIf: string;
  /** SANDBOXD_EGRESS_ALLOW_CIDRS for these addresses. */
  allowEnv: string;
  /**
   * The command prefix that runs sandboxd in the network namespace this network is joined to, as the caller's
   * own uid (null: this process's namespace, as root). Used by startTestSandboxd({ net }).
   */
  sandboxdPrefix: string[] | null;
  /** A listening socket inside the far namespace, on `host` (default `ip`) and `port` (default: any free). */
  listen(host?: string, port?: number): Promise<{ server: net.Server; port: number }>;
  /** A listening socket on sandboxd's host (its network namespace), e.g. a host service bound to `::`. */
  hostListen(host: string, port?: number): Promise<{ server: net.Server; port: number }>;
  /** A connection made from sandboxd's host. */
  hostConnect(host: string, port: number): Promise<net.Socket>;
  /** Every address of sandboxd's host. */
  hostAddresses(): Promise<string[]>;
  /** Runs `ip ARGS` on sandboxd's host (e.g. to add an address to `hostIf`). */
  hostIpCmd(args: string[]): void;
  close(): void;
}

interface Helper {
  pid: number;
  /** One request: a message and, for sockets, the handle. */
  ask(m: Record<string, unknown>): Promise<{ m: HelperAnswer; handle: unknown }>;
  kill(): void;
}

interface HelperAnswer {
  port?: number;
  error?: string;
  addresses?: string[];
}

async function startHelper(command: string, args: string[]): Promise<Helper> {
  const child: ChildProcess = spawn(command, [...args, process.execPath, '-e', HELPER_JS], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, (m: HelperAnswer, h: unknown) => void>();
  let seq = 0;
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`netns helper exited (${code})`)));
    child.once('message', () => resolve());
  });
  child.removeAllListeners('exit');
  child.on('message', (m: HelperAnswer & { id?: number }, handle: unknown) => {
    if (m.id !== undefined) waiting.get(m.id)?.(m, handle);
  });
  return {
    pid: child.pid ?? 0,
    ask(m) {
      const id = seq++;
      return new Promise((resolve) => {
        waiting.set(id, (answer, handle) => {
          waiting.delete(id);
          resolve({ m: answer, handle });
        });
        child.send({ ...m, id });
      });
    },
    kill: () => child.kill('SIGKILL'),
  };
}

function run(command: string, args: string[]): void {
  execFileSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** nsenter arguments that run a command in the namespaces of `pid`; `user`: its user namespace too. */
function enter(pid: number, user: boolean): string[] {
  return [`--target=${pid}`, ...(user ? ['--user', '--preserve-credentials'] : []), '--net', '--'];
}

export async function createTestNet(): Promise<TestNet> {
  const tag = randomBytes(3).toString('hex');
  const [x, y] = [...randomBytes(2)];
  const v4 = `10.${x}.${(y ?? 0) & 0xf8}`;
  const v6 = `fd${randomBytes(1).toString('hex')}:${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}:${tag.slice(0, 4)}`;
  const hostIf = `pdk${tag}h`;
  const farIf = `pdk${tag}n`;
  const root = process.getuid?.() === 0;
  const nsenter = hostBin('nsenter');
  const unshare = hostBin('unshare');
  const ipBin = hostBin('ip');

  const helpers: Helper[] = [];
  const servers: net.Server[] = [];
  const close = () => {
    for (const s of servers) s.close();
    for (const h of helpers) h.kill();
    if (root)
      try {
        run(ipBin, ['link', 'del', hostIf]);
      } catch {}
  };
  let host: Helper | null = null;
  let far: Helper;
  let inHost: (args: string[]) => void;
  try {
    if (root) {
      far = await startHelper(unshare, ['--net', '--']);
      helpers.push(far);
      inHost = (args) => run(ipBin, args);
    } else {
      const h = await startHelper(unshare, ['--user', '--map-root-user', '--net', '--']);
      host = h;
      helpers.push(h);
      far = await startHelper(nsenter, [...enter(h.pid, true), unshare, '--net', '--']);
      helpers.push(far);
      inHost = (args) => run(nsenter, [...enter(h.pid, true), ipBin, ...args]);
      inHost(['link', 'set', 'lo', 'up']);
    }
    const inFar = (args: string[]) => run(nsenter, [...enter(far.pid, !root), ipBin, ...args]);
    inHost(['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', farIf, 'netns', String(far.pid)]);
    inHost(['addr', 'add', `${v4}.1/29`, 'dev', hostIf]);
    inHost(['-6', 'addr', 'add', `${v6}::1/64`, 'dev', hostIf, 'nodad']);
    inHost(['link', 'set', hostIf, 'up']);
    inFar(['link', 'set', 'lo', 'up']);
    inFar(['addr', 'add', `${v4}.2/29`, 'dev', farIf]);
    inFar(['addr', 'add', `${v4}.6/29`, 'dev', farIf]);
    inFar(['-6', 'addr', 'add', `${v6}::2/64`, 'dev', farIf, 'nodad']);
    inFar(['-6', 'addr', 'add', `${v6}::6/64`, 'dev', farIf, 'nodad']);
    inFar(['link', 'set', farIf, 'up']);
  } catch (err) {
    close();
    throw err;
  }

  const listenIn = async (helper: Helper, host: string, port: number) => {
    const { m, handle } = await helper.ask({ op: 'listen', host, port });
    if (m.error || !handle) throw new Error(`listen in the test namespace failed: ${m.error}`);
    servers.push(handle as net.Server);
    return { server: handle as net.Server, port: m.port ?? 0 };
  };
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  return {
    ip: `${v4}.2`,
    ip6: `${v6}::2`,
    otherIp: `${v4}.6`,
    otherIp6: `${v6}::6`,
    hostIp: `${v4}.1`,
    hostIp6: `${v6}::1`,
    hostIf,
    allowEnv: `${v4}.0/30,${v6}::/126`,
    // In the owned user namespace the caller is root; a nested one maps it back to its own uid and gid, so
    // sandboxd runs as an ordinary user there (rootless), with no capability in the namespaces of the test.
    sandboxdPrefix: host
      ? [
          nsenter,
          ...enter(host.pid, true),
          unshare,
          '--user',
          `--map-user=${uid}`,
          `--map-group=${gid}`,
          '--',
        ]
      : null,
    listen: (addr = `${v4}.2`, port = 0) => listenIn(far, addr, port),
    async hostListen(addr, port = 0) {
      if (host) return listenIn(host, addr, port);
      const server = net.createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ host: addr, port }, () => resolve());
      });
      servers.push(server);
      return { server, port: (server.address() as net.AddressInfo).port };
    },
    async hostConnect(addr, port) {
      if (host) {
        const { m, handle } = await host.ask({ op: 'connect', host: addr, port });
        if (m.error || !handle) throw new Error(`connect from the test host namespace failed: ${m.error}`);
        return handle as net.Socket;
      }
      const s = net.connect({ host: addr, port });
      await new Promise<void>((resolve, reject) => {
        s.once('connect', resolve);
        s.once('error', reject);
      });
      return s;
    },
    async hostAddresses() {
      if (!host)
        return Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
      return (await host.ask({ op: 'addresses' })).m.addresses ?? [];
    },
    hostIpCmd: (args) => inHost(args),
    close,
  };
}
