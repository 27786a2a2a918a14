// `npm run screenshots`: regenerates the console's PNGs in docs/screenshots/ by running the
// screenshot files (apps/web/test/*.shots.ts) through the test runner, which provides the
// embedded PostgreSQL, the real server and sandboxd they need.
import { spawnSync } from 'node:child_process';
import { globSync } from 'node:fs';

const files = globSync('apps/web/test/*.shots.ts').sort();
const run = spawnSync(process.execPath, ['scripts/test.ts', ...files], { stdio: 'inherit' });
process.exit(run.status ?? 1);
