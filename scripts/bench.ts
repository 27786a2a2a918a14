// `npm run bench`: every benchmark, each reporting its figures and their ratio to a
// baseline measured in the same run (absolute numbers drift between machines).
//   npm run bench              all
//   npm run bench -- http      only the HTTP benchmark (names: http, sandbox, login, mail-oracle, redaction, conversations, flood, conversations-log, agents, web, takeover, database-outage, retention, usage, export, account-delete, sweep, changes, terminal)
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { removeTree, sessionShims, unmountUnder } from '../apps/sandboxd/test/harness.ts';
import { detachLoopDevicesUnder, killSandboxInitsUnder } from '../apps/sandboxd/test/leftovers.ts';
import { SHARED_ROOT } from '../apps/server/src/db/embedded.ts';
import { SERVER_NODE_FLAGS } from '../apps/server/src/node-flags.ts';

const ROOT = resolve(import.meta.dirname, '..');
const BENCHES: Record<string, string> = {
  http: 'scripts/bench-http.ts',
  sandbox: 'scripts/bench-sandbox.ts',
  login: 'scripts/bench-login.ts',
  usage: 'scripts/bench-usage.ts',
  'mail-oracle': 'scripts/bench-mail-oracle.ts',
  redaction: 'scripts/bench-redaction.ts',
  conversations: 'scripts/bench-conversations.ts',
  flood: 'scripts/bench-flood.ts',
  'conversations-log': 'scripts/bench-conversations-log.ts',
  agents: 'scripts/bench-agents.ts',
  web: 'scripts/bench-web.ts',
  takeover: 'scripts/bench-takeover.ts',
  'database-outage': 'scripts/bench-database-outage.ts',
  retention: 'scripts/bench-retention.ts',
  export: 'scripts/bench-export.ts',
  'account-delete': 'scripts/bench-account-delete.ts',
  sweep: 'scripts/bench-sweep.ts',
  changes: 'scripts/bench-changes.ts',
  terminal: 'scripts/bench-terminal.ts',
};

// Names come first; everything from the first option on is passed to each benchmark
// (`npm run bench -- conversations --runs 9`).
const args = process.argv.slice(2);
const firstOption = args.findIndex((a) => a.startsWith('-'));
const wanted = firstOption === -1 ? args : args.slice(0, firstOption);
const passed = firstOption === -1 ? [] : args.slice(firstOption);
const names = wanted.length > 0 ? wanted : Object.keys(BENCHES);
/**
 * Each benchmark runs with a TMPDIR of its own, so what it leaves when it is killed or crashes (its
 * sandboxd and PostgreSQL, their sandbox inits, shims, disk images and files) is found there and
 * removed after it; a benchmark that ends normally has removed everything itself.
 */
function processesOf(dir: string): number[] {
  const found: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${e}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${e}/environ`, 'utf8').split('\0');
      if (environ.includes(`TMPDIR=${dir}`) || cmdline.includes(`${dir}/`)) found.push(Number(e));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/**
 * PostgreSQL clusters of data dirs under `dir` that root keeps in /var/lib/paddock/clusters (named in
 * their `.owner` file, apps/server/src/db/embedded.ts): their servers are stopped and they are removed.
 */
async function removeClustersOf(dir: string): Promise<number> {
  const clusters = join(SHARED_ROOT, 'clusters');
  let owners: string[] = [];
  try {
    owners = readdirSync(clusters).filter((n) => n.endsWith('.owner'));
  } catch {
    return 0;
  }
  let removed = 0;
  for (const file of owners) {
    const cluster = join(clusters, file.slice(0, -'.owner'.length));
    try {
      if (!readFileSync(join(clusters, file), 'utf8').startsWith(`${dir}/`)) continue;
    } catch {
      continue;
    }
    try {
      const pid = Number(readFileSync(join(cluster, 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(pid, 'SIGQUIT'); // immediate shutdown
      for (let i = 0; i < 50; i++) {
        process.kill(pid, 0);
        await new Promise((r) => setTimeout(r, 100));
      }
    } catch {
      // not running (any more)
    }
    rmSync(cluster, { recursive: true, force: true });
    rmSync(join(clusters, file), { force: true });
    removed++;
  }
  return removed;
}

async function sweep(dir: string): Promise<string[]> {
  const left: string[] = [];
  for (let round = 0; round < 3; round++) {
    const pids = [...processesOf(dir), ...sessionShims(dir)];
    if (pids.length === 0) break;
    if (round === 0) left.push(`${pids.length} processes`);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  const clusters = await removeClustersOf(dir);
  if (clusters > 0) left.push(`${clusters} PostgreSQL clusters`);
  const inits = await killSandboxInitsUnder(dir);
  if (inits.length > 0) left.push(`${inits.length} sandbox inits`);
  unmountUnder(dir);
  const loops = detachLoopDevicesUnder(dir);
  if (loops.length > 0) left.push(`${loops.length} loop devices`);
  removeTree(dir);
  return left;
}

// Ctrl-C reaches the benchmark too (same process group); this script waits for it, then sweeps.
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    interrupted = true;
  });

let failed = false;
for (const name of names) {
  const file = BENCHES[name];
  if (!file || !existsSync(join(ROOT, file))) {
    console.error(`unknown benchmark "${name}" (known: ${Object.keys(BENCHES).join(', ')})`);
    failed = true;
    continue;
  }
  console.log(`\n== ${name} (${file})`);
  const tmp = mkdtempSync(join(tmpdir(), 'paddock-bench-'));
  // Like /tmp: a root run's PostgreSQL runs as `postgres`, rootless pieces as other users.
  chmodSync(tmp, 0o1777);
  // The server's own Node flags: the benchmarks host it in their process.
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, join(ROOT, file), ...passed], {
    stdio: 'inherit',
    cwd: ROOT,
    env: { ...process.env, TMPDIR: tmp },
  });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGTERM', forward);
  const code = await new Promise<number>((r) => child.on('exit', (c) => r(c ?? 1)));
  process.off('SIGTERM', forward);
  const left = await sweep(tmp);
  if (left.length > 0)
    console.error(
      `bench: ${name} left ${left.join(', ')} behind (${code === 0 ? 'a bug' : 'it ended early'}); removed`,
    );
  if (code !== 0) {
    failed = true;
    if (interrupted) break;
  }
}
process.exit(failed ? 1 : 0);
