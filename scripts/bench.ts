// `npm run bench`: every benchmark, each reporting its figures and their ratio to a
// baseline measured in the same run (absolute numbers drift between machines).
//   npm run bench              all
//   npm run bench -- http      only the HTTP benchmark (names: http, sandbox, login, mail-oracle, redaction, conversations, flood, conversations-log, agents, web)
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const BENCHES: Record<string, string> = {
  http: 'scripts/bench-http.ts',
  sandbox: 'scripts/bench-sandbox.ts',
  login: 'scripts/bench-login.ts',
  'mail-oracle': 'scripts/bench-mail-oracle.ts',
  redaction: 'scripts/bench-redaction.ts',
  conversations: 'scripts/bench-conversations.ts',
  flood: 'scripts/bench-flood.ts',
  'conversations-log': 'scripts/bench-conversations-log.ts',
  agents: 'scripts/bench-agents.ts',
  web: 'scripts/bench-web.ts',
};

// Names come first; everything from the first option on is passed to each benchmark
// (`npm run bench -- conversations --runs 9`).
const args = process.argv.slice(2);
const firstOption = args.findIndex((a) => a.startsWith('-'));
const wanted = firstOption === -1 ? args : args.slice(0, firstOption);
const passed = firstOption === -1 ? [] : args.slice(firstOption);
const names = wanted.length > 0 ? wanted : Object.keys(BENCHES);
let failed = false;
for (const name of names) {
  const file = BENCHES[name];
  if (!file || !existsSync(join(ROOT, file))) {
    console.error(`unknown benchmark "${name}" (known: ${Object.keys(BENCHES).join(', ')})`);
    failed = true;
    continue;
  }
  console.log(`\n== ${name} (${file})`);
  const code = await new Promise<number>((r) =>
    spawn(process.execPath, [join(ROOT, file), ...passed], { stdio: 'inherit', cwd: ROOT }).on('exit', (c) =>
      r(c ?? 1),
    ),
  );
  if (code !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
