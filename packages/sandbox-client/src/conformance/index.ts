import { after, before, describe } from 'node:test';
import { registerCheckpointTests } from './checkpoint.conformance.ts';
import { type ConformanceContext, createContext, type NetworkTarget, type TargetSource } from './context.ts';
import { registerExecTests } from './exec.conformance.ts';
import { registerFileTests } from './files.conformance.ts';
import { registerLifecycleTests } from './lifecycle.conformance.ts';
import { registerNetworkTests } from './network.conformance.ts';
import { registerSessionTests } from './sessions.conformance.ts';

export type { ConformanceTarget, NetworkTarget } from './context.ts';

export interface ConformanceOptions {
  /** Enables the network-policy enforcement checks (see `NetworkTarget`). */
  network?: NetworkTarget;
}

/**
 * Registers node:test blocks that check a sandbox backend against the
 * interface of the spec ("Outbound interface required from the sandbox
 * backend"). `target` may be a function, resolved in the suite's `before`
 * hook, for a backend started by the caller's own hook.
 *
 * Every test creates its own sandboxes under a unique prefix and destroys
 * them; a final hook destroys any that a failed test left behind.
 */
export function runConformanceSuite(target: TargetSource, options: ConformanceOptions = {}): void {
  let context: ConformanceContext | undefined;
  const ctx = (): ConformanceContext => {
    if (!context) throw new Error('conformance: the target was not resolved (its before hook failed)');
    return context;
  };
  describe('sandbox backend conformance', () => {
    before(async () => {
      context = await createContext(target);
    });
    after(async () => {
      await context?.cleanup();
    });
    registerLifecycleTests(ctx);
    registerFileTests(ctx);
    registerExecTests(ctx);
    registerSessionTests(ctx);
    registerCheckpointTests(ctx);
    registerNetworkTests(ctx, options.network);
  });
}
