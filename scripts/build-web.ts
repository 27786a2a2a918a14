// `npm run build:web`: the console's production build, in three steps that each fail loudly:
//   1. regenerate the API types from the server's OpenAPI document (scripts/gen-web-api.ts),
//   2. type-check the console against them (a changed schema breaks here, not in a browser),
//   3. bundle with Vite into apps/web/dist (served by the server at /).
// `ensureConsoleBuilt()` is the same build, run only when dist is missing or older than the
// console's sources: npm start and the browser tests call it.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { generate } from './gen-web-api.ts';

const root = resolve(import.meta.dirname, '..');
export const WEB_DIR = join(root, 'apps/web');
export const DIST_INDEX = join(WEB_DIR, 'dist/index.html');
const SOURCES = ['src', 'public', 'index.html', 'vite.config.ts', 'package.json'];

function newestMtime(path: string): number {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

/** Why the console needs building, or null when dist is up to date. */
export function consoleBuildNeeded(): string | null {
  if (!existsSync(DIST_INDEX)) return 'it has not been built yet';
  const built = statSync(DIST_INDEX).mtimeMs;
  const changed = SOURCES.some((s) => newestMtime(join(WEB_DIR, s)) > built);
  return changed ? 'its sources changed since the last build' : null;
}

// Vite turns on Node's compile cache in the temp directory; a build is a one-off, and under
// `npm test` nothing may be left in the run's temp directory.
const TOOL_ENV = { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1' };

function step(label: string, run: () => void): void {
  const started = performance.now();
  process.stderr.write(`paddock: console build: ${label}…\n`);
  run();
  process.stderr.write(
    `paddock: console build: ${label} done in ${Math.round(performance.now() - started)} ms\n`,
  );
}

/**
 * `typeCheck: false` bundles without the type check (Vite does not type-check): for `npm start`,
 * where the console of a checkout that passed `npm run typecheck` is only built once.
 */
export async function buildConsole(options: { typeCheck?: boolean } = {}): Promise<void> {
  const text = await generate();
  step('API types', () => writeFileSync(join(WEB_DIR, 'src/api/schema.d.ts'), text));
  if (options.typeCheck !== false)
    step('type check', () => {
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      const r = spawnSync(process.execPath, [tsc, '--noEmit', '-p', join(WEB_DIR, 'tsconfig.json')], {
        stdio: 'inherit',
        env: TOOL_ENV,
      });
      if (r.status !== 0) throw new Error('the console does not type-check against the API (see above)');
    });
  step('bundle', () => {
    const vite = join(root, 'node_modules/vite/bin/vite.js');
    const r = spawnSync(process.execPath, [vite, 'build', '--logLevel', 'warn'], {
      cwd: WEB_DIR,
      stdio: 'inherit',
      env: TOOL_ENV,
    });
    if (r.status !== 0) throw new Error('vite build failed (see above)');
  });
}

/** Builds the console when it is missing or stale; says so, with progress, on stderr. */
export async function ensureConsoleBuilt(options: { typeCheck?: boolean } = {}): Promise<void> {
  const why = consoleBuildNeeded();
  if (!why) return;
  process.stderr.write(`paddock: building the web console (${why})\n`);
  await buildConsole(options);
}

if (import.meta.main) {
  try {
    await buildConsole();
  } catch (err) {
    console.error(`npm run build:web: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
