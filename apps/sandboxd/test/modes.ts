/**
 * The daemon modes an attack test runs in: root, and rootless (the daemon as the unprivileged system user
 * `paddock-rootless-test`, shared by every attack test file; rootless.test.ts has a user of its own, since it
 * asserts that nothing of its user outlives its daemon; as the current user when the tests do not run as root).
 * Rootless is left out only where the kernel refuses unprivileged user namespaces (rootless.test.ts proves
 * sandboxd then refuses to start); with PADDOCK_REQUIRE_ROOTLESS=1 that is an error instead.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const TEST_USER = 'paddock-rootless-test';

export interface DaemonMode {
  name: 'root' | 'rootless';
  /** run the daemon as this user (startTestSandboxd's `user`) */
  user?: { uid: number; gid: number };
}

function ok(cmd: string, args: string[]): boolean {
  return spawnSync(cmd, args, { stdio: 'ignore', timeout: 20_000 }).status === 0;
}

export function daemonModes(): DaemonMode[] {
  const probe = ['unshare', '--user', '--map-root-user', '--mount', '--pid', '--fork', '--net', 'true'];
  if (process.getuid?.() !== 0) {
    if (ok(probe[0]!, probe.slice(1))) return [{ name: 'rootless' }];
    if (process.env['PADDOCK_REQUIRE_ROOTLESS'] === '1')
      throw new Error('rootless mode is required but unprivileged user namespaces are refused');
    return [];
  }
  if (
    !ok('id', ['-u', TEST_USER]) &&
    !ok('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', TEST_USER]) &&
    !ok('id', ['-u', TEST_USER])
  )
    throw new Error(`cannot create the system user ${TEST_USER}`);
  const uid = Number(execFileSync('id', ['-u', TEST_USER], { encoding: 'utf8' }));
  const gid = Number(execFileSync('id', ['-g', TEST_USER], { encoding: 'utf8' }));
  const modes: DaemonMode[] = [{ name: 'root' }];
  if (ok('setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--init-groups', ...probe]))
    modes.push({ name: 'rootless', user: { uid, gid } });
  else if (process.env['PADDOCK_REQUIRE_ROOTLESS'] === '1')
    throw new Error('rootless mode is required but unprivileged user namespaces are refused');
  return modes;
}

/** Resident memory of a process, in bytes. */
export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
}
