// The `runtime` provisioning stage: the agent's CLI must answer `<cli> --version` in the sandbox
// before a turn runs (spec: Sandbox interface rule 2, the runtime probe, 30–120 s).
//
//   probe ok                              → done
//   CLI on the backend's runtime layer,   → done without running it again: the layer is read-only
//   a path that answered before             and content-addressed (/opt/paddock/<hash>), so the same
//                                           path is the same files in every sandbox (LayerCliCache)
//   CLI missing, backend layer installing → "waiting for the runtime layer (installing …)" in the
//                                           log, probe again (bounded by the provisioning deadline)
//   CLI missing, backend without a layer  → npm install -g <pinned package> as the sandbox user
//   (off, failed, or a hosted backend)      (300 s, output streamed to the log), probe again
//   anything else                         → ProvisionError('runtime', why)
//
// The pinned package of each runtime comes from apps/sandboxd/runtime-layer.json, the file the
// backend's layer is built from (docs/sandboxd.md "Runtime layer"; read by turns/runtimes/pinned-cli.ts),
// so both paths give the same CLI.
import { setTimeout as sleep } from 'node:timers/promises';
import type { SandboxClient } from '@paddock/sandbox-client';
import { type PinnedCli, ProvisionError } from '../contracts.ts';
import { runStreaming } from './sandbox-commands.ts';
import type { StageSink } from './stages.ts';

export interface RuntimeProbeTimeouts {
  /** One `--version` call (spec: 30–120 s). */
  probeMs: number;
  /** The in-sandbox `npm install -g` (like the packages stage). */
  installMs: number;
  /** How long the stage waits for a backend layer that is installing (the provisioning deadline). */
  waitMs: number;
  /** Between two looks at an installing layer. */
  pollMs: number;
}

export const DEFAULT_RUNTIME_PROBE_TIMEOUTS: RuntimeProbeTimeouts = {
  probeMs: 60_000,
  installMs: 300_000,
  waitMs: 20 * 60_000,
  pollMs: 2_000,
};

/**
 * Exits 127 when the CLI is not on PATH. Otherwise prints the path it resolves to as its first line
 * (taken out of the log by ensureRuntime), then exits 0 at once when that path is one of the
 * arguments after the CLI's name (answered before), else runs `<path> --version`.
 */
const PROBE = [
  'p=$(command -v "$1" 2>/dev/null) || exit 127',
  'shift',
  'printf "%s\\n" "$p"',
  'for v do [ "$p" != "$v" ] || exit 0; done',
  'exec "$p" --version </dev/null',
].join('\n');

/** Where a sandbox sees the backend's runtime layers: read-only, one directory per content hash. */
const LAYER_PREFIX = '/opt/paddock/';

/**
 * The paths of the CLIs on a backend's runtime layer that answered `--version` in this process. A
 * later probe of the same path skips the CLI's start-up (1–3 s for gemini and opencode on 2 cores, on
 * every conversation start otherwise). A CLI anywhere else (an in-sandbox install, a hosted backend)
 * is probed every time. Only paths are kept, never what a CLI printed: that ran with one
 * conversation's env and files, and the next conversation may be another tenant's.
 */
export type LayerCliCache = Set<string>;

/** Passes every chunk on, except the probe's first stdout line (the resolved path), which it keeps. */
function pathTaker(sink: StageSink) {
  let head: Buffer | null = Buffer.alloc(0);
  let path = '';
  const out: StageSink = {
    output(stream, chunk) {
      if (stream !== 'stdout' || head === null) {
        sink.output(stream, chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const newline = head.indexOf(10);
      if (newline === -1) return;
      path = head.subarray(0, newline).toString('utf8');
      const after = head.subarray(newline + 1);
      head = null;
      if (after.length > 0) out.output('stdout', after);
    },
    stage: (event) => sink.stage(event),
  };
  return {
    sink: out,
    /** The path the CLI resolved to ('' before that line came). */
    path: () => path,
  };
}

const note = (sink: StageSink, text: string) => sink.output('stdout', Buffer.from(`paddock: ${text}\n`));

export async function ensureRuntime(input: {
  sandbox: SandboxClient;
  name: string;
  cli: PinnedCli;
  env: Record<string, string>;
  sink: StageSink;
  signal?: AbortSignal;
  timeouts?: Partial<RuntimeProbeTimeouts>;
  /** Shared by the provisionings of one server process (see LayerCliCache). */
  layerCache?: LayerCliCache;
}): Promise<void> {
  const t: RuntimeProbeTimeouts = { ...DEFAULT_RUNTIME_PROBE_TIMEOUTS, ...input.timeouts };
  const { cli } = input;
  const deadline = Date.now() + t.waitMs;
  let installed = false;
  let waiting = '';
  let sawReady = false;
  const cache = input.layerCache;
  for (;;) {
    const answered = cache ? [...cache].filter((p) => p.endsWith(`/${cli.bin}`)) : [];
    const taker = pathTaker(input.sink);
    const probe = await runStreaming(
      input.sandbox,
      input.name,
      {
        argv: ['sh', '-c', PROBE, 'paddock-probe', cli.bin, ...answered],
        env: input.env,
        timeoutMs: t.probeMs,
      },
      taker.sink,
      input.signal,
    );
    if ('timedOut' in probe)
      throw new ProvisionError(
        'runtime',
        `${cli.bin} --version did not answer within ${Math.round(t.probeMs / 1000)} s`,
      );
    if (probe.exitCode === 0) {
      const path = taker.path();
      // A path that answered before adds no line to the log: that is the server's bookkeeping, and
      // the log is what the agent's sandbox did (issue 37).
      if (!answered.includes(path) && cache && path.startsWith(LAYER_PREFIX) && !path.includes('/../'))
        cache.add(path);
      return;
    }
    if (probe.exitCode !== 127 || installed)
      throw new ProvisionError(
        'runtime',
        installed && probe.exitCode === 127
          ? `${cli.bin} is still not on PATH after installing ${cli.package}@${cli.version}`
          : `${cli.bin} --version failed (exit ${probe.exitCode}); its output is in the conversation's log`,
      );
    // Missing: the backend's layer may still be installing, or there is none.
    const layer = input.sandbox.runtimeLayer ? await input.sandbox.runtimeLayer({ retry: true }) : null;
    if (layer?.state === 'installing') {
      if (Date.now() >= deadline)
        throw new ProvisionError(
          'runtime',
          `the sandbox backend's runtime layer did not finish installing within ${Math.round(t.waitMs / 60_000)} min`,
        );
      // `current` is a package (`name@version`) or what the step does (sandboxd's progress).
      const current = layer.progress?.current ?? '';
      const doing = /.@\d/.test(current) ? `installing ${current}` : current || 'installing';
      const what = layer.progress
        ? `${doing}, step ${layer.progress.step} of ${layer.progress.steps}`
        : 'installing';
      if (what !== waiting) {
        waiting = what;
        await note(input.sink, `waiting for the runtime layer (${what})`);
      }
      await sleep(t.pollMs, undefined, input.signal ? { signal: input.signal } : {}).catch(() => {
        throw new ProvisionError('runtime', 'provisioning was cancelled');
      });
      continue;
    }
    if (layer?.state === 'ready' && !sawReady) {
      // It may have become ready after this probe ran: one more look.
      sawReady = true;
      continue;
    }
    if (layer?.state === 'ready')
      throw new ProvisionError(
        'runtime',
        `${cli.bin} is not on PATH although the sandbox backend's runtime layer is ready (${layer.version})`,
      );
    // No layer (a hosted backend, the layer off or failed): install the pinned CLI into the sandbox.
    await note(
      input.sink,
      `${cli.bin} is not in the sandbox${layer?.state === 'failed' ? ' (the runtime layer failed to install)' : ''}; installing ${cli.package}@${cli.version}`,
    );
    const install = await runStreaming(
      input.sandbox,
      input.name,
      {
        argv: ['npm', 'install', '-g', '--no-audit', '--no-fund', `${cli.package}@${cli.version}`],
        env: input.env,
        timeoutMs: t.installMs,
      },
      input.sink,
      input.signal,
    );
    if ('timedOut' in install)
      throw new ProvisionError(
        'runtime',
        `npm install of ${cli.package} did not finish within ${Math.round(t.installMs / 1000)} s`,
      );
    if (install.exitCode !== 0)
      throw new ProvisionError(
        'runtime',
        `npm install of ${cli.package}@${cli.version} failed (exit ${install.exitCode}); its output is in the conversation's log`,
      );
    installed = true;
  }
}
