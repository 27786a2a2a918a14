// `paddock shell` as a child process against the real server (real port, real sandboxd, the
// scripted runtime), through the terminal WebSocket only. Stdin is piped here (no TTY), so the
// bytes are forwarded as they are and the end of stdin ends the remote shell's input.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  type ConversationHarness,
  startConversationHarness,
} from '../../server/test/helpers/conversations.ts';
import type { TestUser } from '../../server/test/helpers/factories.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'paddock.mjs');

let h: ConversationHarness;
let user: TestUser;
let agentId: string;
const temps: string[] = [];

before(async () => {
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: 100 } } });
  user = await h.user();
  agentId = await h.agent(user);
});
after(async () => {
  await h.close();
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function shell(args: string[], stdin: string, apiKey = user.apiKey) {
  const home = mkdtempSync(join(tmpdir(), 'paddock-cli-shell-'));
  temps.push(home);
  const child = spawn(process.execPath, [BIN, ...args], {
    env: {
      PATH: process.env['PATH'],
      HOME: home,
      XDG_CONFIG_HOME: join(home, 'config'),
      PADDOCK_URL: h.url,
      PADDOCK_API_KEY: apiKey,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += String(d);
  });
  child.stderr.on('data', (d) => {
    stderr += String(d);
  });
  child.stdin.end(stdin);
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

describe('paddock shell', () => {
  it("runs commands in the sandbox and exits with the shell's exit code", async () => {
    const conv = await h.start(user, { agent_id: agentId, prompt: 'echo made > made.txt' });
    await h.waitForTurn(user, conv.id, 1, 60_000);
    const run = await shell(['shell', conv.id], 'cat made.txt; echo hi-$((40+2))\nexit 3\n');
    assert.equal(run.code, 3, run.stderr);
    assert.match(run.stdout, /hi-42/);
    assert.match(run.stdout, /made\r?\n/);

    const eof = await shell(['shell', conv.id], 'echo bye-$((1+1))\n');
    assert.equal(eof.code, 0, eof.stderr);
    assert.match(eof.stdout, /bye-2/);
  });

  it("says how to wake a reclaimed sandbox, exit 1; another account's conversation is not found", async () => {
    const conv = await h.start(user, { agent_id: agentId, prompt: 'true' });
    await h.waitForTurn(user, conv.id, 1, 60_000);
    const other = await h.user();
    const foreign = await shell(['shell', conv.id], '', other.apiKey);
    assert.equal(foreign.code, 1);
    assert.match(foreign.stderr, /not found/i);

    await h.reclaim(user, conv.id);
    const run = await shell(['shell', conv.id], 'echo never\n');
    assert.equal(run.code, 1);
    assert.match(run.stderr, /sandbox_not_running/);
    assert.match(run.stderr, /send a prompt/);
    assert.doesNotMatch(run.stdout, /never/);
  });
});
