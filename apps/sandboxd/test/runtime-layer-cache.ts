/**
 * The runtime layer a test run shares (runtime/layer.ts): installed once into a stable cache directory,
 * reused across test files and runs, so no test installs 1.2 GB of agent CLIs. scripts/test.ts prepares it
 * before the tests start; a test gets a sandboxd with it through `startTestSandboxd({ runtimeLayer: true })`
 * (the daemon gets SANDBOXD_RUNTIME_LAYER=<this directory>).
 *
 * Where: PADDOCK_RUNTIME_LAYER_CACHE, else /var/cache/paddock/runtime-layer as root (every user can read
 * it there: the rootless daemons of the tests run as another user), else ~/.cache/paddock/runtime-layer.
 *
 *   node apps/sandboxd/test/runtime-layer-cache.ts     prepares it (progress on stderr)
 */
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../src/log.ts';
import { installLayer, layerHash, loadLayerSpec } from '../src/runtime/layer.ts';

export function sharedLayerDir(): string {
  const env = process.env['PADDOCK_RUNTIME_LAYER_CACHE'];
  if (env?.trim()) return path.resolve(env.trim());
  if (process.getuid?.() === 0) return '/var/cache/paddock/runtime-layer';
  const cache = process.env['XDG_CACHE_HOME']?.trim() || path.join(os.homedir(), '.cache');
  return path.join(cache, 'paddock', 'runtime-layer');
}

/** The layer directory of the current spec in the shared cache (installing it when missing). */
export async function prepareSharedLayer(): Promise<{ dir: string; seconds: number }> {
  const t0 = Date.now();
  const spec = loadLayerSpec();
  const dir = await installLayer({
    root: sharedLayerDir(),
    spec,
    install: { toolPath: process.env['PATH'] ?? '', env: process.env },
    log: createLogger('info', process.stderr, 'pretty'),
  });
  return { dir, seconds: Math.round((Date.now() - t0) / 100) / 10 };
}

export function sharedLayerHash(): string {
  return layerHash(loadLayerSpec(), process.env['PATH'] ?? '');
}

if (import.meta.main) {
  const { dir, seconds } = await prepareSharedLayer();
  process.stdout.write(`runtime layer ready: ${dir} (${seconds} s)\n`);
}
