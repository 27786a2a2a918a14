// `npm run bench -- agents` (scripts/bench-agents.ts) prepares the shared runtime layer first,
// saying so on stderr, and exits non-zero when no runtime was measured, instead of a report
// of nothing and exit 0 (issue 37, finding 10). A runtime name no adapter knows stands for a
// machine where every runtime is skipped; the real PostgreSQL and sandboxd still start.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

describe('the agents benchmark', () => {
  it('prepares the runtime layer with progress, and fails when nothing was measured', async () => {
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [join(ROOT, 'scripts', 'bench-agents.ts'), '--runs', '3', '--runtimes', 'no-such-runtime'],
        { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d) => {
        stderr += String(d);
      });
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stderr }));
    });
    assert.match(run.stderr, /^bench agents: preparing the runtime layer \(the agent CLIs\) in \//m);
    assert.match(run.stderr, /^bench agents: runtime layer ready in [\d.]+ s$/m);
    assert.match(run.stderr, /^skipped: no-such-runtime/m);
    assert.match(run.stderr, /nothing was measured/);
    assert.equal(run.code, 1, run.stderr);
  });
});
