// The conversation commands as a child process against the real server (real port, real
// sandboxd, the scripted runtime: the prompt is the turn's shell script), through the public
// API only.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { noCredentialMessage } from '../../server/src/conversations/turns/runtimes/common.ts';
import {
  type ConversationHarness,
  startConversationHarness,
} from '../../server/test/helpers/conversations.ts';
import type { TestUser } from '../../server/test/helpers/factories.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'paddock.mjs');

let h: ConversationHarness;
let user: TestUser;
let agentId: string;
let agentName: string;
const temps: string[] = [];

before(async () => {
  h = await startConversationHarness();
  user = await h.user();
  agentName = `cli-agent-${Date.now().toString(36)}`;
  agentId = await h.agent(user, { name: agentName });
});
// Each test's conversations go when it ends: their sandboxes count against the user's quota.
afterEach(async () => {
  const list = await h.api(user, 'GET', '/api/conversations?limit=200');
  for (const c of list.body.data as { id: string }[]) {
    const res = await h.api(user, 'DELETE', `/api/conversations/${c.id}`);
    assert.equal(res.status, 204);
  }
});
after(async () => {
  await h.close();
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

interface Child {
  /** Resolves once stdout contains `text`. */
  sawOut(text: string): Promise<void>;
  interrupt(): void;
  done: Promise<Run>;
}

function start(args: string[], stdin = ''): Child {
  const home = mkdtempSync(join(tmpdir(), 'paddock-cli-conv-'));
  temps.push(home);
  const child = spawn(process.execPath, [BIN, ...args], {
    env: {
      PATH: process.env['PATH'],
      HOME: home,
      XDG_CONFIG_HOME: join(home, 'config'),
      PADDOCK_URL: h.url,
      PADDOCK_API_KEY: user.apiKey,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const waiters: Array<{ text: string; resolve: () => void }> = [];
  child.stdout.on('data', (d) => {
    stdout += String(d);
    for (const w of waiters.filter((x) => stdout.includes(x.text))) w.resolve();
  });
  child.stderr.on('data', (d) => {
    stderr += String(d);
  });
  child.stdin.end(stdin);
  return {
    sawOut: (text) =>
      stdout.includes(text) ? Promise.resolve() : new Promise((resolve) => waiters.push({ text, resolve })),
    interrupt: () => child.kill('SIGINT'),
    done: new Promise((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    }),
  };
}

const paddock = (args: string[], stdin?: string) => start(args, stdin).done;

/** The conversation id `run -f` announces on stderr. */
const announced = (run: Run) => /conversation ([0-9a-f-]{36}) started/.exec(run.stderr)?.[1] ?? '';

describe('paddock run -f', () => {
  it("streams the agent's stdout and stderr byte for byte and exits with the turn's exit code", async () => {
    const run = await paddock([
      'run',
      agentName,
      'printf "out 1\\nout 2"; echo " é" ; echo oops >&2; exit 3',
      '-f',
    ]);
    assert.equal(run.code, 3, run.stderr);
    assert.equal(run.stdout, 'out 1\nout 2 é\n');
    assert.match(run.stderr, /oops\n/);
    // stderr is not a terminal here: plain stage lines
    assert.match(run.stderr, /\[provision\] started/);
    assert.match(run.stderr, /\[turn\] (done|failed)/);
    const id = announced(run);
    const conv = await h.get(user, id);
    assert.equal(conv.source, 'cli');
    assert.equal(conv.agent_id, agentId);
    const [turn] = await h.turns(user, id);
    assert.equal(turn?.exit_code, 3);
  });

  it('exits 0 for a turn that succeeded and reads the prompt from standard input with "-"', async () => {
    const run = await paddock(['run', agentId, '-', '--follow'], 'echo from-stdin\n');
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'from-stdin\n');
  });

  it('prints JSON lines with -o json: the conversation, every event as the API sends it, then the turn', async () => {
    const run = await paddock(['-o', 'json', 'run', agentName, 'echo hi', '-f']);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const conversation = lines[0]?.['conversation'] as { id: string; source: string };
    assert.equal(conversation.source, 'cli');
    const events = lines.filter((l) => 'stream' in l);
    assert.equal(
      events
        .filter((e) => e['stream'] === 'stdout')
        .map((e) => e['text'])
        .join(''),
      'hi\n',
    );
    const stored = await h.events(conversation.id);
    assert.deepEqual(
      events.map((e) => e['id']),
      stored.map((r) => r.id),
      'every stored event once, in order, with its id',
    );
    const turn = lines.at(-1)?.['turn'] as { status: string; exit_code: number };
    assert.equal(turn.status, 'succeeded');
    assert.equal(turn.exit_code, 0);
  });

  it('detaches on Ctrl-C without stopping the agent, and says how to re-attach', async () => {
    const child = start(['run', agentName, 'echo start; sleep 2; echo finish', '-f']);
    await child.sawOut('start\n');
    child.interrupt();
    const run = await child.done;
    assert.equal(run.code, 130, run.stderr);
    const id = announced(run);
    assert.match(
      run.stderr,
      new RegExp(`detached; the agent keeps running\\. Re-attach with: paddock logs ${id} -f`),
    );
    assert.doesNotMatch(run.stdout, /finish/);
    const turn = await h.waitForTurn(user, id, 1);
    assert.equal(turn.status, 'succeeded', 'the turn ran to its end after the CLI detached');
    const logs = await paddock(['logs', id]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.equal(logs.stdout, 'start\nfinish\n');
  });

  it('shows why provisioning failed (the setup output and the failed stage) and exits 1', async () => {
    const environmentId = await h.environment(user, {
      setup_script: 'echo "preparing"\necho "broken step" >&2\nexit 7',
    });
    const broken = `cli-broken-${Date.now().toString(36)}`;
    await h.agent(user, { name: broken, environment_id: environmentId });
    const run = await paddock(['run', broken, 'echo never', '-f']);
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stdout, '', "stdout is kept for the agent's words");
    assert.match(run.stderr, /preparing\n/, 'the setup output is streamed with the stages');
    assert.match(run.stderr, /broken step\n/);
    assert.match(run.stderr, /\[setup\] failed/);
    assert.match(run.stderr, /paddock: conversation failed: \S/);
    assert.equal((await h.get(user, announced(run))).status, 'failed');
  });

  it("says why a turn failed in words, not only its exit code (a missing key: the wrapper's sentence)", async () => {
    // What the adapters' credential check prints before the CLI would start (common.ts).
    const sentence = noCredentialMessage('Anthropic', 'anthropic', 'ANTHROPIC_API_KEY');
    const run = await paddock([
      'run',
      agentName,
      `printf '%s\\n' '${sentence.replaceAll("'", "'\\''")}' >&2; exit 2`,
      '-f',
    ]);
    assert.equal(run.code, 2, run.stderr);
    assert.ok(
      run.stderr.includes(
        `paddock: turn failed: ${sentence.slice('paddock: '.length)} (the runtime exited with code 2)\n`,
      ),
      run.stderr,
    );
  });

  it('refuses an unknown agent and a file that is not an image before starting anything', async () => {
    const unknown = await paddock(['run', 'no-such-agent', 'echo x']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /agent "no-such-agent" not found/);
    const dir = mkdtempSync(join(tmpdir(), 'paddock-cli-img-'));
    temps.push(dir);
    const notImage = join(dir, 'notes.png');
    writeFileSync(notImage, 'just text');
    const before = (await h.api(user, 'GET', '/api/conversations?limit=200')).body.data.length as number;
    const refused = await paddock(['run', agentName, 'echo x', '--image', notImage]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /notes\.png is not a PNG, JPEG, GIF or WebP image/);
    const after = (await h.api(user, 'GET', '/api/conversations?limit=200')).body.data.length as number;
    assert.equal(after, before);
  });

  it('hands an image to the runtime with the prompt', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paddock-cli-img-'));
    temps.push(dir);
    const png = join(dir, 'dot.png');
    // a 1×1 PNG
    writeFileSync(
      png,
      Buffer.from(
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
        'base64',
      ),
    );
    const run = await paddock(['run', agentName, 'echo "images=$PADDOCK_IMAGES"', '--image', png, '-f']);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'images=1\n');
  });
});

describe('paddock prompt, logs, conversations, turns, interrupt, terminate, delete', () => {
  it('runs a follow-up turn and shows only its output; lists the conversation and its turns', async () => {
    const first = await paddock(['run', agentName, 'echo first turn', '-f']);
    assert.equal(first.code, 0, first.stderr);
    const id = announced(first);
    await h.waitFor(user, id, (c) => c.status === 'idle');

    const second = await paddock(['prompt', id, 'echo second turn; exit 4', '-f']);
    assert.equal(second.code, 4, second.stderr);
    assert.equal(second.stdout, 'second turn\n');

    const all = await paddock(['logs', id, '--streams', 'stdout']);
    assert.equal(all.code, 0, all.stderr);
    assert.equal(all.stdout, 'first turn\nsecond turn\n');
    assert.doesNotMatch(all.stderr, /\[turn\]/, 'stage events filtered out');

    const list = await paddock(['conversations', '--agent', agentName, '--status', 'idle']);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^ID\s+TITLE\s+STATUS\s+AGENT\s+UPDATED/);
    assert.match(list.stdout, new RegExp(`${id}\\s+echo first turn\\s+idle\\s+${agentName}`));

    const turns = await paddock(['turns', id]);
    assert.equal(turns.code, 0, turns.stderr);
    assert.match(turns.stdout, /1\s+\S+\s+succeeded\s+0\s+\S+\s+echo first turn/);
    assert.match(turns.stdout, /2\s+\S+\s+failed\s+4\s+\S+\s+echo second turn; exit 4/);
  });

  it('interrupts a running turn (prompt -f then exits with the interrupted turn status), terminates, then deletes', async () => {
    const started = await paddock(['-o', 'json', 'run', agentName, 'echo warm']);
    assert.equal(started.code, 0, started.stderr);
    const id = (JSON.parse(started.stdout) as { id: string }).id;
    await h.waitForTurn(user, id, 1);

    const follower = start(['prompt', id, 'echo sleeping; sleep 30; echo never', '-f']);
    await follower.sawOut('sleeping\n');
    const interrupted = await paddock(['interrupt', id]);
    assert.equal(interrupted.code, 0, interrupted.stderr);
    const run = await follower.done;
    assert.equal(run.stdout, 'sleeping\n');
    const turn = (await h.turns(user, id)).find((t) => t.seq === 2);
    assert.equal(turn?.status, 'interrupted');
    // the process's exit code when it reported a non-zero one (143 after TERM), else 130
    assert.equal(run.code, turn?.exit_code ? turn.exit_code : 130, run.stderr);
    assert.match(run.stderr, /\[turn\] interrupted/);

    const idle = await paddock(['interrupt', id]);
    assert.equal(idle.code, 1);
    assert.match(idle.stderr, /no_turn_running/);

    const terminated = await paddock(['terminate', id]);
    assert.equal(terminated.code, 0, terminated.stderr);
    assert.match(terminated.stdout, new RegExp(`terminated conversation ${id}`));
    const refused = await paddock(['prompt', id, 'echo again']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /410 conversation_terminated/);

    const deleted = await paddock(['delete', id]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal((await h.api(user, 'GET', `/api/conversations/${id}`)).status, 404);
    const gone = await paddock(['logs', id]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /404/);
    for (const r of [idle, refused, gone]) assert.ok(!/\n\s+at /.test(r.stderr), 'no stack trace');
  });

  it('refuses a bad --streams list as a usage error', async () => {
    const run = await paddock(['logs', '00000000-0000-4000-8000-000000000000', '--streams', 'stdout,bogus']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /--streams takes a comma list of stdout, stderr, stage/);
  });
});
