// The runtime layer (src/runtime/layer.ts, docs/sandboxd.md "Runtime layer"): the agent CLIs, node, rg
// (and the host's git) in every sandbox, read-only; a layer that becomes ready later appears in running
// sandboxes; a killed install never leaves a ready-looking layer. The real layer is the test run's shared
// one (scripts/test.ts installs it once from the npm registry: runtime-layer-cache.ts).
import assert from 'node:assert/strict';
import {
  chownSync,
  existsSync,
  readlinkSync as fsReadlink,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { layerHash, loadLayerSpec } from '../src/runtime/layer.ts';
import { processStartTime } from '../src/runtime/namespaces.ts';
import { startTestSandboxd, type TestSandboxd } from './harness.ts';
import { api, sh, waitFor } from './helpers.ts';
import { daemonModes } from './modes.ts';
import { sharedLayerDir, sharedLayerHash } from './runtime-layer-cache.ts';

const HASH = sharedLayerHash();
const BIN = `/opt/paddock/${HASH}/bin`;
const spec = JSON.parse(readFileSync(new URL('../runtime-layer.json', import.meta.url), 'utf8')) as {
  node: string;
  runtimes: Record<string, { package: string; version: string; bin: string }>;
};

for (const mode of daemonModes()) {
  describe(`runtime layer in every sandbox (${mode.name})`, () => {
    let d: TestSandboxd;
    before(async () => {
      assert.ok(
        existsSync(path.join(sharedLayerDir(), HASH)),
        `the shared runtime layer is not installed in ${sharedLayerDir()} (npm test installs it; see the run's first lines)`,
      );
      d = await startTestSandboxd({ runtimeLayer: true, ...(mode.user ? { user: mode.user } : {}) });
      assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'layer' })).status, 201);
    });
    after(async () => {
      await d?.stop();
    });

    it('reports the layer ready with its version and pinned packages', async () => {
      const r = await api(d, 'GET', '/v1/runtime-layer');
      assert.equal(r.status, 200);
      assert.equal(r.json['state'], 'ready');
      assert.equal(r.json['version'], HASH);
      assert.equal(r.json['bin'], BIN);
      const packages = r.json['packages'] as Record<string, string>;
      for (const rt of Object.values(spec.runtimes)) assert.equal(packages[rt.package], rt.version);
    });

    it('runs every agent CLI, rg, git and node as the sandbox user, the layer first on PATH', async () => {
      const r = await sh(
        d,
        'layer',
        'set -e; id -u; echo "PATH=$PATH"; for c in claude codex gemini opencode rg git node; do ' +
          'printf "%s=%s " "$c" "$(command -v $c)"; "$c" --version </dev/null 2>&1 | head -n 1; done',
        { timeoutMs: 120_000 },
      );
      assert.equal(r.exitCode, 0, r.stdout + r.stderr);
      const lines = r.stdout.split('\n');
      assert.equal(lines[0], '1000');
      assert.ok(lines[1]?.startsWith(`PATH=${BIN}:`), lines[1]);
      const out = (c: string) => lines.find((l) => l.startsWith(`${c}=`)) ?? '';
      for (const rt of Object.values(spec.runtimes)) {
        assert.ok(out(rt.bin).startsWith(`${rt.bin}=${BIN}/${rt.bin} `), out(rt.bin));
        assert.ok(out(rt.bin).includes(rt.version), `${rt.bin} --version: ${out(rt.bin)}`);
      }
      assert.match(out('rg'), /^rg=\/opt\/paddock\/[0-9a-f]{16}\/bin\/rg ripgrep \d+/);
      assert.match(out('git'), /git version \d+/);
      assert.ok(out('node').endsWith(`v${spec.node}`), out('node'));
    });

    it('cannot be written by the sandbox user nor the sandbox root', async () => {
      for (const user of [undefined, 'root'] as const) {
        const r = await sh(
          d,
          'layer',
          `for f in ${BIN}/planted /opt/paddock/planted /opt/paddock/${HASH}/node_modules/.bin/claude; do ` +
            'if (echo x > "$f") 2>/dev/null; then echo "wrote $f"; fi; done; ' +
            `rm -f ${BIN}/claude 2>/dev/null && echo removed; ` +
            `mount -o remount,rw /opt/paddock 2>/dev/null && echo remounted; ` +
            `umount /opt/paddock 2>/dev/null && echo unmounted; true`,
          user ? { user } : {},
        );
        assert.equal(r.exitCode, 0, r.stderr);
        assert.equal(r.stdout, '', `as ${user ?? 'the sandbox user'}: ${r.stdout}`);
      }
      const again = await sh(d, 'layer', 'claude --version');
      assert.equal(again.exitCode, 0, again.stderr);
    });

    if (mode.name === 'root') {
      it('root execs install npm packages globally outside the read-only layer (NPM_CONFIG_PREFIX)', async () => {
        const r = await sh(d, 'layer', 'echo "$NPM_CONFIG_PREFIX"; npm config get prefix', { user: 'root' });
        assert.equal(r.exitCode, 0, r.stderr);
        assert.deepEqual(r.stdout.trim().split('\n'), ['/usr/local', '/usr/local']);
      });
    }
  });
}

for (const mode of daemonModes()) {
  describe(`runtime layer install (${mode.name})`, () => {
    const as = mode.user ? { user: mode.user } : {};
    /** A directory of the test's, handed to the daemon's user in rootless mode as root. */
    const own = (dir: string): string => {
      if (mode.user) chownSync(dir, mode.user.uid, mode.user.gid);
      return dir;
    };
    let layers: string;
    before(() => {
      layers = own(mkdtempSync(path.join(os.tmpdir(), 'paddock-layers-')));
    });
    after(() => {
      rmSync(layers, { recursive: true, force: true });
    });

    it('is off by default in tests, and a sandbox without it has no /opt/paddock contents nor PATH entry', async () => {
      const d = await startTestSandboxd(as);
      try {
        const s = await api(d, 'GET', '/v1/runtime-layer');
        assert.equal(s.status, 200);
        assert.equal(s.json['state'], 'off');
        assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'plain' })).status, 201);
        const r = await sh(d, 'plain', 'echo "$PATH"; ls -A /opt/paddock 2>/dev/null | wc -l');
        assert.equal(r.exitCode, 0, r.stderr);
        assert.ok(!r.stdout.includes('/opt/paddock'), r.stdout);
        assert.ok(r.stdout.endsWith('\n0\n'), 'nothing mounted at /opt/paddock');
      } finally {
        await d.stop();
      }
    });

    it('appears in a sandbox created while it was installing, once it is renamed into place', async () => {
      const dir = path.join(layers, 'later');
      mkdirSync(dir);
      own(dir);
      // Another installer (this process) holds the partial: the daemon waits for it instead of installing.
      const partial = path.join(dir, `${HASH}.partial`);
      mkdirSync(partial);
      own(partial);
      writeFileSync(
        path.join(partial, 'owner.json'),
        JSON.stringify({ pid: process.pid, start: processStartTime(process.pid) }),
      );
      const d = await startTestSandboxd({ runtimeLayer: dir, ...as });
      try {
        const s = await api(d, 'GET', '/v1/runtime-layer');
        assert.equal(s.json['state'], 'installing');
        assert.equal((await api(d, 'POST', '/v1/sandboxes', { name: 'early' })).status, 201);
        const before = await sh(d, 'early', 'claude --version');
        assert.equal(before.exitCode, 127, 'no claude yet');
        // The other installer finishes: a layer whose claude is a script, renamed into place.
        mkdirSync(path.join(partial, 'bin'));
        writeFileSync(
          path.join(partial, 'bin', 'claude'),
          '#!/bin/sh\necho "2.1.330 (Claude Code, test layer)"\n',
          {
            mode: 0o755,
          },
        );
        rmSync(path.join(partial, 'owner.json'));
        renameSync(partial, path.join(dir, HASH));
        const r = await sh(
          d,
          'early',
          'claude --version; touch /opt/paddock/x 2>/dev/null || echo read-only',
        );
        assert.equal(r.exitCode, 0, r.stderr);
        assert.equal(r.stdout, '2.1.330 (Claude Code, test layer)\nread-only\n');
        await waitFor(
          async () => (await api(d, 'GET', '/v1/runtime-layer')).json['state'] === 'ready',
          'ready',
        );
      } finally {
        await d.stop();
      }
    });

    it('killed mid-install leaves no ready-looking layer, and the next daemon takes the partial over', async () => {
      const dir = path.join(layers, 'crash');
      const first = await startTestSandboxd({ runtimeLayer: dir, ...as });
      let second: TestSandboxd | null = null;
      try {
        // The real install from the npm registry starts in the background; boot did not wait for it.
        await waitFor(
          async () => {
            const s = (await api(first, 'GET', '/v1/runtime-layer')).json;
            return s['state'] === 'installing' && s['progress'] !== null;
          },
          'the install to start',
          20_000,
        );
        assert.ok(existsSync(path.join(dir, `${HASH}.partial`)));
        await sleep(1500); // npm is writing into the partial
        process.kill(first.pid, 'SIGKILL');
        await first.stop();
        assert.deepEqual(
          readdirSync(dir).filter((n) => n === HASH),
          [],
          'no complete-looking layer after the kill',
        );
        // The installer's npm died with the daemon: nothing writes into the partial any more.
        await waitFor(() => !npmUnder(dir), 'npm to die with the daemon');
        second = await startTestSandboxd({ runtimeLayer: dir, ...as });
        await waitFor(
          () => second!.logs().some((l) => l.includes('removing the partial install of a stopped installer')),
          'the takeover',
          20_000,
        );
        assert.equal((await api(second, 'GET', '/v1/runtime-layer')).json['state'], 'installing');
      } finally {
        await first.stop();
        await second?.stop();
        await waitFor(() => !npmUnder(dir), 'npm to stop').catch(() => {});
      }
    });
  });
}

/** Whether some process (the installer's npm) has its working directory in `dir`. */
function npmUnder(dir: string): boolean {
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cwd = readlinkCwd(e);
      if (cwd.startsWith(`${dir}/`)) return true;
    } catch {}
  }
  return false;
}

function readlinkCwd(pid: string): string {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('npm') ? fsReadlink(`/proc/${pid}/cwd`) : '';
}

describe("the layer's name (layerHash)", () => {
  it('differs once a host tool the layer was installed without is on the host: that layer is not reused', () => {
    const layerSpec = loadLayerSpec();
    const tool = `paddock-test-tool-${process.pid}`;
    const withTool = { ...layerSpec, hostTools: [...layerSpec.hostTools, tool] };
    const dir = mkdtempSync(path.join(os.tmpdir(), 'layer-tool-'));
    try {
      const without = layerHash(withTool, dir);
      writeFileSync(path.join(dir, tool), '#!/bin/sh\n', { mode: 0o755 });
      assert.notEqual(layerHash(withTool, dir), without);
      assert.equal(layerHash(withTool, dir), layerHash(withTool, dir));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
