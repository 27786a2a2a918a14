// `node scripts/import-graph.ts`: checks the import graph of apps/ (relative imports of the
// .ts/.tsx sources, type imports included, test files excluded) for the two rules of
// docs/architecture.md:
//   1. no import circle (each strongly connected component of more than one file is printed);
//   2. the conversation engine's rooms import only down their lines
//      (apps/server/src/conversations/README.md); contracts.ts may name types of any room.
// Prints what it found and exits 1 on any finding.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const APPS = join(ROOT, 'apps');
const CONVERSATIONS = join(APPS, 'server/src/conversations');
/** A room's line: a file may import from its own line and the lines below (higher numbers). */
const LINES: Record<string, number> = {
  api: 1,
  engine: 2,
  provisioning: 3,
  turns: 3,
  // The agent's work out of the sandbox (issue 41): provisioning records the clones' bases and the
  // engine each turn's changes; its routes (changes, files, terminal, push) sit beside api/'s.
  work: 3,
  log: 4,
  '': 5,
};
/** Rooms on one line that must not import each other. */
const APART: [string, string][] = [['provisioning', 'turns']];

function sources(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) sources(path, out);
    else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

const files = sources(APPS);
const known = new Set(files);
const SPECIFIER =
  /(?:import|export)\s+(?:type\s+)?(?:[^'"]*?\sfrom\s+)?['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;
const graph = new Map<string, string[]>();
for (const file of files) {
  const targets = new Set<string>();
  for (const match of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
    const target = resolve(dirname(file), match[1] ?? match[2] ?? '');
    if (known.has(target)) targets.add(target);
  }
  graph.set(file, [...targets]);
}
const rel = (path: string) => relative(ROOT, path);

// 1. Circles: Tarjan's strongly connected components.
const circles: string[][] = [];
const index = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
let next = 0;
function visit(v: string): void {
  index.set(v, next);
  low.set(v, next);
  next++;
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!index.has(w)) {
      visit(w);
      low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
  }
  if (low.get(v) !== index.get(v)) return;
  const component: string[] = [];
  let w: string | undefined;
  do {
    w = stack.pop();
    if (w === undefined) break;
    onStack.delete(w);
    component.push(w);
  } while (w !== v);
  if (component.length > 1 || (graph.get(v) ?? []).includes(v)) circles.push(component);
}
for (const file of files) if (!index.has(file)) visit(file);

// 2. The rooms' lines.
const room = (path: string): string | null => {
  if (!path.startsWith(`${CONVERSATIONS}/`)) return null;
  const parts = relative(CONVERSATIONS, path).split('/');
  return parts.length > 1 ? (parts[0] ?? '') : '';
};
const upward: string[] = [];
for (const [file, targets] of graph) {
  const from = room(file);
  if (from === null || rel(file).endsWith('conversations/contracts.ts')) continue;
  for (const target of targets) {
    const to = room(target);
    if (to === null || to === from) continue;
    const up = (LINES[to] ?? 0) < (LINES[from] ?? 0);
    const apart = APART.some(([a, b]) => (from === a && to === b) || (from === b && to === a));
    if (up || apart) upward.push(`${rel(file)} -> ${rel(target)}`);
  }
}

const imports = [...graph.values()].reduce((n, targets) => n + targets.length, 0);
console.log(`${files.length} files, ${imports} relative imports`);
console.log(`circles: ${circles.length}`);
for (const component of circles) console.log(`  ${component.map(rel).join(' ↔ ')}`);
console.log(`imports up the conversation engine's lines: ${upward.length}`);
for (const edge of upward) console.log(`  ${edge}`);
process.exitCode = circles.length + upward.length > 0 ? 1 : 0;
