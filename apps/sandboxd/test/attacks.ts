/**
 * Attacks of the outside security review (issue 12), shared by security.host.test.ts (root mode) and
 * rootless.test.ts: each is performed as a tenant would, and reports what it achieved.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestSandboxd } from './harness.ts';
import { api, type ExecOptions, exec, sh } from './helpers.ts';

/** The host directory of sandbox `name` (the tests know the data dir; the tenant directory is looked up). */
export function sandboxDir(d: TestSandboxd, name: string): string {
  const tenants = path.join(d.dataDir, 'tenants');
  for (const t of readdirSync(tenants)) {
    const dir = path.join(tenants, t, 'sandboxes', name);
    if (existsSync(path.join(dir, 'sandbox.json'))) return dir;
  }
  throw new Error(`no directory for sandbox ${name}`);
}

/** The host pid of sandbox `name`'s init, as its record holds it (0 when it is not running). */
export function initPid(d: TestSandboxd, name: string): number {
  const rec = JSON.parse(readFileSync(path.join(sandboxDir(d, name), 'sandbox.json'), 'utf8')) as {
    init: { pid: number } | null;
  };
  return rec.init?.pid ?? 0;
}

/**
 * The host directory of sandbox `name`'s writable layer (overlay upper dirs): inside its mounted disk image
 * (root mode with a disk limit, src/runtime/disks.ts) or a plain directory.
 */
export function sandboxLayer(d: TestSandboxd, name: string): string {
  const dir = sandboxDir(d, name);
  const rec = JSON.parse(readFileSync(path.join(dir, 'sandbox.json'), 'utf8')) as { disk?: string };
  return rec.disk === 'image' ? path.join(dir, 'disk', 'layer') : path.join(dir, 'layer');
}

/** The exec modes: every way sandboxd starts a process (own child or shim, pipes or pty). */
export const EXEC_MODES: { label: string; o: ExecOptions }[] = [
  { label: 'pipes', o: {} },
  { label: 'tty', o: { tty: true } },
  { label: 'detachable', o: { detachable: true } },
  { label: 'detachable tty', o: { detachable: true, tty: true } },
];

/** A host path that must never appear: the attacks' payloads create it. Removed (and reported) if they did. */
export function canary(): { path: string; fired(): boolean } {
  const p = path.join(os.tmpdir(), `paddock-canary-${process.pid}-${Math.random().toString(16).slice(2)}`);
  return {
    path: p,
    fired() {
      const hit = existsSync(p);
      rmSync(p, { force: true });
      return hit;
    },
  };
}

/**
 * Finding 1, PATH: the tenant plants programs named like the host helpers in its home, then asks for an exec
 * whose PATH starts with that directory's host path (its upper layer). Returns whether any ran on the host,
 * per exec mode, and the exec results (they must still work).
 */
export async function pathPlant(
  d: TestSandboxd,
  name: string,
): Promise<{ fired: string[]; outputs: string[] }> {
  const c = canary();
  const names = [
    'nsenter',
    'sh',
    'env',
    'unshare',
    'setpriv',
    'node',
    'cat',
    'chmod',
    'mkdir',
    'dirname',
    'id',
  ];
  const plant = await sh(
    d,
    name,
    `set -e; mkdir -p ~/bin; for n in ${names.join(' ')}; do printf '#!/bin/sh\\necho pwned > ${c.path}\\n' > ~/bin/$n; chmod 755 ~/bin/$n; done`,
  );
  assert.equal(plant.exitCode, 0, plant.stderr);
  const upperBin = path.join(sandboxLayer(d, name), 'root', 'home', 'sandbox', 'bin');
  assert.ok(existsSync(path.join(upperBin, 'nsenter')), 'the planted file is in the upper layer');
  const fired: string[] = [];
  const outputs: string[] = [];
  for (const { label, o } of EXEC_MODES) {
    const r = await exec(d, name, ['/usr/bin/id', '-u'], {
      ...o,
      env: { PATH: `${upperBin}:/usr/local/bin:/usr/bin:/bin` },
    });
    outputs.push(`${label}: ${r.exitCode} ${r.stdout.trim()}`);
    if (c.fired()) fired.push(label);
  }
  const w = await api(
    d,
    'PUT',
    `/v1/sandboxes/${name}/fs/write?path=after-plant.txt`,
    new TextEncoder().encode('x'),
  );
  assert.equal(w.status, 204, w.text);
  if (c.fired()) fired.push('fs write');
  return { fired, outputs };
}

/**
 * Finding 1, LD_PRELOAD: the tenant uploads a shared object whose constructor creates the canary, then asks
 * for execs with LD_PRELOAD set to its host path (and to its path inside). Needs a C compiler on the host.
 */
export async function preloadPlant(
  d: TestSandboxd,
  name: string,
): Promise<{ fired: string[]; inside: string }> {
  const c = canary();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'paddock-preload-'));
  let so: Buffer;
  try {
    const src = path.join(tmp, 'p.c');
    writeFileSync(
      src,
      `#include <fcntl.h>\n#include <unistd.h>\n__attribute__((constructor)) static void pwn(void) {\n  int fd = open("${c.path}", O_CREAT | O_WRONLY, 0644);\n  if (fd >= 0) { write(fd, "pwned\\n", 6); close(fd); }\n}\n`,
    );
    execFileSync('cc', ['-shared', '-fPIC', '-o', path.join(tmp, 'p.so'), src], { stdio: 'pipe' });
    so = readFileSync(path.join(tmp, 'p.so'));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  const w = await api(
    d,
    'PUT',
    `/v1/sandboxes/${name}/fs/write?path=/tmp/p.so&mode=0755`,
    new Uint8Array(so),
  );
  assert.equal(w.status, 204, w.text);
  const hostSo = path.join(sandboxLayer(d, name), 'root', 'tmp', 'p.so');
  assert.ok(existsSync(hostSo), 'the planted object is in the upper layer');
  const fired: string[] = [];
  for (const { label, o } of EXEC_MODES) {
    await exec(d, name, ['/usr/bin/true'], { ...o, env: { LD_PRELOAD: hostSo } });
    if (c.fired()) fired.push(label);
  }
  // Inside, the variable is the tenant's to use: the object runs in the sandbox, where the canary's path is
  // the sandbox's own.
  await sh(d, name, `mkdir -p ${path.dirname(c.path)}`);
  await exec(d, name, ['/usr/bin/true'], { env: { LD_PRELOAD: '/tmp/p.so' } });
  if (c.fired()) fired.push('inside path');
  const inside = (await sh(d, name, `cat ${c.path}; rm -f ${c.path}`)).stdout;
  return { fired, inside };
}

/** Writes an executable script (for fake host tools). */
export function script(file: string, body: string): void {
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
}
