/**
 * A sandbox's network: its egress proxy (built here, one address guard for all), the proxy listener in the
 * sandbox's network namespace, and its network policy.
 *
 * Invariants:
 * - The listener opened for an init (by a helper process, runtime/namespaces.ts listenHelper) becomes the
 *   sandbox's only while that init runs; one that arrives after the sandbox stopped, restarted or was
 *   destroyed is closed. A listener that failed to open is opened again by the next exec (`listening` is
 *   cleared). When an exec may start is the lifecycle's (sandboxes.service.ts).
 * - A policy applies at once (the proxy's next connection) and is in the record, so a restart keeps it.
 * Tests: test/egress.test.ts, test/policy.test.ts, test/listen-helper.test.ts, test/lifecycle.test.ts.
 */
import type net from 'node:net';
import type { SandboxdOptions } from './config.ts';
import type { Logger } from './log.ts';
import { createEgressGuard } from './proxy/addresses.ts';
import { type PolicyRule, parseRules } from './proxy/policy.ts';
import { EgressProxy } from './proxy/proxy.ts';
import { type InitHandle, receiveListener, sameInit } from './runtime/namespaces.ts';

/** The proxy's port on the sandbox's loopback (every exec's http_proxy). */
export const PROXY_PORT = 3128;

/** What the network uses of a sandbox (the Sandbox of sandboxes.service.ts). */
export interface NetworkedSandbox {
  readonly rec: { name: string; init: InitHandle | null; policy: PolicyRule[] };
  readonly proxy: EgressProxy;
  readonly destroyed: boolean;
  listener: net.Server | null;
  /** The proxy listener being opened for the running init (settles into `listener`), or null. */
  listening: Promise<net.Server> | null;
}

export interface NetworkDeps<S extends NetworkedSandbox> {
  opts: Pick<SandboxdOptions, 'hostsOverride' | 'serviceRoutes' | 'egressAllow' | 'proxy'>;
  log: Logger;
  /** The listen helper's command for init `pid` (runtime/namespaces.ts NamespaceRuntime). */
  listenHelperArgv(pid: number): string[];
  /** The tenant's sandbox; throws sandbox_not_found. */
  find(tenant: string, name: string): S;
  /** Writes the sandbox record. */
  persist(sb: S): void;
}

export function createNetwork<S extends NetworkedSandbox>(deps: NetworkDeps<S>) {
  const { opts, log } = deps;
  /** One egress address guard for every sandbox's proxy (it caches the host's interface addresses). */
  const guard = createEgressGuard({ allow: opts.egressAllow });

  /** The egress proxy of sandbox `name`, enforcing `policy`. */
  function proxyFor(name: string, policy: PolicyRule[]): EgressProxy {
    return new EgressProxy(
      {
        log,
        hostsOverride: opts.hostsOverride,
        serviceRoutes: opts.serviceRoutes,
        guard,
        limits: opts.proxy,
      },
      name,
      policy,
    );
  }

  /** Opens the proxy listener in the network namespace of init `pid`. */
  async function openListener(sb: S, pid: number): Promise<net.Server> {
    const server = await receiveListener(deps.listenHelperArgv(pid), PROXY_PORT, 10_000, (late) => {
      log.warn('proxy listener arrived after its start was given up; closed', { sandbox: sb.rec.name });
      late.close();
    });
    server.on('connection', (s: net.Socket) => sb.proxy.handle(s));
    server.on('error', (err) => log.warn('proxy listener error', { sandbox: sb.rec.name, err }));
    return server;
  }

  function closeListener(sb: S): void {
    sb.listener?.close();
    sb.listener = null;
    sb.listening = null; // one still opening is closed when it arrives (adoptListener)
    sb.proxy.closeAll();
  }

  /**
   * The listener being opened for init `h` becomes the sandbox's when it arrives, unless the sandbox was
   * stopped, restarted or destroyed meanwhile (then it is closed: it is bound in a namespace that is gone or
   * no longer the sandbox's). A failure clears `listening`, so that the next exec opens one again.
   */
  function adoptListener(sb: S, h: InitHandle, opening: Promise<net.Server>): Promise<net.Server> {
    const adopted: Promise<net.Server> = opening.then(
      (server) => {
        const init = sb.rec.init;
        if (sb.listening !== adopted || sb.destroyed || !init || !sameInit(init, h)) {
          server.close();
          throw new Error('the sandbox stopped while its proxy listener was opening');
        }
        sb.listener = server;
        sb.listening = null;
        return server;
      },
      (err: unknown) => {
        if (sb.listening === adopted) sb.listening = null;
        throw err;
      },
    );
    adopted.catch(() => {}); // awaited by whoever needs it
    sb.listening = adopted;
    return adopted;
  }

  return {
    proxyFor,
    openListener,
    closeListener,
    adoptListener,

    setPolicy(tenant: string, name: string, body: unknown): void {
      const sb = deps.find(tenant, name);
      const rules = parseRules(body);
      sb.rec.policy = rules;
      deps.persist(sb);
      sb.proxy.setPolicy(rules);
      log.info('network policy set', { sandbox: name, rules: rules.length });
    },

    getPolicy(tenant: string, name: string) {
      return { rules: deps.find(tenant, name).rec.policy };
    },
  };
}
