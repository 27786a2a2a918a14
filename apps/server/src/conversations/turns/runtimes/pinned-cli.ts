// The CLI each runtime adapter runs, pinned in apps/sandboxd/runtime-layer.json: the file the
// backend's runtime layer is built from and the package the runtime stage installs when a backend
// has no layer (provisioning/runtime-probe.ts), so both paths give the same CLI.
import { readFileSync } from 'node:fs';
import type { PinnedCli } from '../../contracts.ts';

const LAYER_SPEC = new URL('../../../../../sandboxd/runtime-layer.json', import.meta.url);

let pinned: Record<string, PinnedCli> | null = null;

/** The pinned CLI of each runtime (apps/sandboxd/runtime-layer.json), for RuntimeAdapter.cli. */
export function pinnedCli(runtime: 'claude' | 'codex' | 'gemini' | 'opencode'): PinnedCli {
  pinned ??= (JSON.parse(readFileSync(LAYER_SPEC, 'utf8')) as { runtimes: Record<string, PinnedCli> })
    .runtimes;
  const cli = pinned[runtime];
  if (!cli) throw new Error(`apps/sandboxd/runtime-layer.json pins no CLI for ${runtime}`);
  return cli;
}
