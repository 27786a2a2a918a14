// CPU time by thread name across the whole machine, from /proc (Linux): where a benchmark's CPU
// went (the server's main thread, V8's GC helpers, PostgreSQL, …). Used under BENCH_DEBUG=1.
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks (USER_HZ, 100 on Linux) of user + system time per thread name, digits trimmed. */
export function cpuSnapshot(): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // gone
    }
    for (const tid of tasks) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = stat
          .slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
          .replace(/[/:].*$/, '')
          .replace(/\d+$/, '');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const ticks = Number(fields[11]) + Number(fields[12]);
        out.set(name, (out.get(name) ?? 0) + ticks);
      } catch {
        // the thread ended
      }
    }
  }
  return out;
}

/** The busiest thread names between two snapshots, in ms: "MainThread=420ms V8Worker=310ms …". */
export function cpuDiff(before: Map<string, number>, after: Map<string, number>, top = 6): string {
  const rows = [...after]
    .map(([name, ticks]) => [name, ticks - (before.get(name) ?? 0)] as const)
    .filter(([name, ticks]) => ticks > 0 && !name.startsWith('kworker'))
    .sort((a, b) => b[1] - a[1]);
  return rows
    .slice(0, top)
    .map(([name, ticks]) => `${name}=${ticks * 10}ms`)
    .join(' ');
}
