import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { createSandboxClient, type SandboxClient } from '../client.ts';
import type { SandboxLogger } from '../types.ts';

/** Where the backend under test is and what the suite may rely on. */
export interface ConformanceTarget {
  baseUrl: string;
  token: string;
  /** Sandbox names start with it. Default `conformance-<8 hex>`. */
  namePrefix?: string;
  logger?: SandboxLogger;
}

/**
 * Network-policy enforcement checks. The suite starts an HTTP server (on
 * 127.0.0.1, or wherever `serve` puts it) and fetches it from inside a sandbox
 * under two names that the backend must route to that server (for sandboxd:
 * its test-hosts override; sandboxd refuses loopback, so its test serves from
 * a test network namespace). Without it only the policy endpoint itself is checked.
 */
export interface NetworkTarget {
  /** A host name the policy allows, resolved by the backend to the suite's loopback server. */
  allowedHost: string;
  /** A second such host name the policy denies. */
  deniedHost: string;
  /**
   * The argv that fetches a URL inside the sandbox and prints the body; it must
   * exit non-zero when the fetch fails. Default: curl, else wget.
   */
  fetchCommand?: (url: string) => string[];
  /** Port for the suite's loopback server. Default: any free port. */
  port?: number;
  /**
   * Makes the suite's server accept connections where the backend routes the two names, and returns the
   * port. Default: listen on 127.0.0.1:`port`.
   */
  serve?: (server: Server) => Promise<number>;
}

/** What every conformance test works with: a client and a registry of sandboxes to clean up. */
export interface ConformanceContext {
  target: ConformanceTarget;
  client: SandboxClient;
  /** A fresh sandbox name with the suite's prefix, registered for cleanup. */
  name(tag: string): string;
  /** Creates a sandbox (registered for cleanup) and returns its name. */
  create(tag: string): Promise<string>;
  /** Destroys every sandbox this context named. */
  cleanup(): Promise<void>;
  /** A raw call with the suite's token (or `token: null` for none), for status-level checks. */
  raw(method: string, path: string, init?: { token?: string | null; json?: unknown }): Promise<Response>;
}

export type TargetSource = ConformanceTarget | (() => ConformanceTarget | Promise<ConformanceTarget>);

export async function createContext(source: TargetSource): Promise<ConformanceContext> {
  const target = typeof source === 'function' ? await source() : source;
  const prefix = target.namePrefix ?? `conformance-${randomBytes(4).toString('hex')}`;
  const client = createSandboxClient({
    baseUrl: target.baseUrl,
    token: target.token,
    ...(target.logger ? { logger: target.logger } : {}),
  });
  const named = new Set<string>();
  let counter = 0;
  const name = (tag: string): string => {
    counter++;
    const value = `${prefix}-${tag}-${counter}`;
    named.add(value);
    return value;
  };
  return {
    target,
    client,
    name,
    async create(tag) {
      const sandbox = name(tag);
      await client.create(sandbox);
      return sandbox;
    },
    async cleanup() {
      const names = [...named];
      named.clear();
      await forEachLimited(names, 8, (sandbox) => client.destroy(sandbox, { retry: true }));
    },
    raw(method, path, init = {}) {
      const headers: Record<string, string> = {};
      const token = init.token === undefined ? target.token : init.token;
      if (token !== null) headers['authorization'] = `Bearer ${token}`;
      if (init.json !== undefined) headers['content-type'] = 'application/json';
      return fetch(new URL(target.baseUrl.replace(/\/+$/, '') + path), {
        method,
        headers,
        body: init.json === undefined ? null : JSON.stringify(init.json),
        signal: AbortSignal.timeout(30_000),
      });
    },
  };
}

/** Runs `run` over `items`, at most `limit` at a time; rejects with the first failure after all settle. */
export async function forEachLimited<T>(
  items: T[],
  limit: number,
  run: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const failures: unknown[] = [];
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      try {
        await run(item);
      } catch (error) {
        failures.push(error);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failures.length > 0) throw failures[0];
}

/**
 * The directory the suite writes under inside a sandbox: the sandbox user's
 * home (a sandbox need not run as root, so `/` may not be writable).
 */
export async function workDirOf(context: ConformanceContext, sandbox: string): Promise<string> {
  const result = await context.client.exec(sandbox, { cmd: ['sh', '-c', 'printf %s "$HOME"'] });
  const home = result.stdout.toString();
  if (result.exitCode !== 0 || !home.startsWith('/')) {
    throw new Error(`conformance: cannot find the sandbox user's home (exit ${result.exitCode}: ${home})`);
  }
  return `${home.replace(/\/+$/, '')}/conformance`;
}
