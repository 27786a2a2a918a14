// Rendering a recorded conversation log for a person, as plain lines, and as JSON lines.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  createRenderer,
  formatDuration,
  formatUsage,
  type LogEvent,
  type RenderMode,
  type TurnEvent,
  toolSummary,
} from '../src/render.ts';

const at = '2026-11-24T05:00:00.000Z';
const LOG: LogEvent[] = [
  { id: '1', stream: 'stage', stage: 'provision', state: 'started', turn_id: null, created_at: at },
  {
    id: '2',
    stream: 'stage',
    stage: 'provision',
    state: 'done',
    duration_ms: 1234,
    turn_id: null,
    created_at: at,
  },
  { id: '3', stream: 'stage', stage: 'setup', state: 'started', turn_id: null, created_at: at },
  { id: '4', stream: 'stdout', text: 'installing', turn_id: null, created_at: at },
  { id: '5', stream: 'stage', stage: 'setup', state: 'done', duration_ms: 80, turn_id: null, created_at: at },
  { id: '6', stream: 'stage', stage: 'turn', state: 'started', turn_id: 't1', created_at: at },
  { id: '7', stream: 'stdout', text: 'hello\n', turn_id: 't1', created_at: at },
  { id: '8', stream: 'stderr', text: 'warn: x\n', turn_id: 't1', created_at: at },
  {
    id: '9',
    stream: 'stage',
    stage: 'turn',
    state: 'failed',
    duration_ms: 61_500,
    message: 'exit code 3',
    turn_id: 't1',
    created_at: at,
  },
];

function render(mode: RenderMode, events: LogEvent[], options: Parameters<typeof createRenderer>[2] = {}) {
  const out: string[] = [];
  const err: string[] = [];
  /** Both streams in the order written, as one terminal shows them. */
  const tty: string[] = [];
  const r = createRenderer(
    mode,
    {
      out: (t) => {
        out.push(t);
        tty.push(t);
      },
      err: (t) => {
        err.push(t);
        tty.push(t);
      },
    },
    options,
  );
  for (const e of events) r.event(e);
  r.notice('owner_lost', 'the server stopped');
  r.record('turn', { id: 't1', exit_code: 3 });
  r.close();
  return { out: out.join(''), err: err.join(''), tty: tty.join('') };
}

const ESC = '\u001b';
/** What a terminal shows: every `\r` + clear-line the spinner writes wipes what the line held. */
const screen = (s: string) =>
  s
    .replaceAll(new RegExp(`${ESC}\\[[0-9;]*m`, 'g'), '')
    .split('\n')
    .map((line) => line.split('\r\u001b[2K').at(-1))
    .join('\n');

describe('rendering the log', () => {
  it("writes a turn's stdout to stdout and its stderr and the provisioning output to stderr, bytes untouched, in every text mode", () => {
    for (const mode of ['person', 'plain'] as const) {
      const { out, err } = render(mode, LOG);
      assert.equal(out, 'hello\n', mode);
      assert.ok(err.includes('installing\n'), mode);
      assert.ok(err.includes('warn: x\n'), mode);
    }
  });

  it('renders stages for a person: ✔ with the duration, ✖ with the failure message, no spinner left behind', () => {
    const { err } = render('person', LOG, { color: false, now: () => 0 });
    const lines = screen(err).split('\n');
    assert.ok(lines.includes('✔ provision 1.2s'), err);
    // the setup output ended without a newline: the stage line starts on a line of its own
    assert.ok(lines.includes('✔ setup 80ms'), err);
    assert.ok(lines.includes('✖ turn 1m 02s: exit code 3'), err);
    assert.ok(lines.includes('paddock: the server stopped'), err);
    // With the clock standing still, a spinner over the turn would read exactly this.
    assert.ok(!err.includes('turn 0ms'), 'no spinner for the turn: its output is the progress');
    assert.ok(err.endsWith('\n'));
  });

  it('colours only when asked, and the person mode clears its spinner line before output', () => {
    const coloured = render('person', LOG, { color: true }).err;
    assert.ok(coloured.includes(`${ESC}[32m✔`));
    assert.ok(coloured.includes(`${ESC}[31m✖`));
    assert.ok(!render('person', LOG, { color: false }).err.includes(`${ESC}[3`));
    // A clock that stands still: the spinner's elapsed time is 0ms however slow the machine is.
    const { tty } = render('person', LOG, { color: false, now: () => 0 });
    assert.ok(tty.includes(`⠙ setup 0ms\r${ESC}[2Kinstalling\n✔ setup 80ms\n`), JSON.stringify(tty));
  });

  it('renders stages as plain lines when stderr is not a terminal', () => {
    const { err } = render('plain', LOG);
    assert.equal(
      err,
      [
        '[provision] started',
        '[provision] done in 1.2s',
        '[setup] started',
        'installing', // the setup output ended without a newline: the stage line begins a fresh line
        '[setup] done in 80ms',
        '[turn] started',
        'warn: x',
        '[turn] failed in 1m 02s: exit code 3',
        'paddock: the server stopped',
        '',
      ].join('\n'),
    );
  });

  it('prints one JSON object per line with -o json: the events as received, notices and records', () => {
    const { out, err } = render('json', LOG);
    assert.equal(err, '');
    const lines = out
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as unknown);
    assert.deepEqual(lines.slice(0, LOG.length), LOG);
    assert.deepEqual(lines[LOG.length], { notice: 'owner_lost', message: 'the server stopped' });
    assert.deepEqual(lines[LOG.length + 1], { turn: { id: 't1', exit_code: 3 } });
  });

  it('formats durations for a person', () => {
    assert.equal(formatDuration(0), '0ms');
    assert.equal(formatDuration(999), '999ms');
    assert.equal(formatDuration(1000), '1.0s');
    assert.equal(formatDuration(59_949), '59.9s');
    assert.equal(formatDuration(125_000), '2m 05s');
  });
});

/** A turn shown through its turn events, as the server sends them with streams=…,events. */
let seq = 100;
const ev = (event: TurnEvent): LogEvent => ({
  id: String(seq++),
  stream: 'events',
  turn_id: 't1',
  created_at: at,
  event,
});
const raw = (text: string): LogEvent => ({
  id: String(seq++),
  stream: 'stdout',
  turn_id: 't1',
  created_at: at,
  text,
});
const TURN: LogEvent[] = [
  { id: '1', stream: 'stage', stage: 'provision', state: 'started', turn_id: null, created_at: at },
  { id: '2', stream: 'stdout', text: 'cloned\n', turn_id: null, created_at: at },
  {
    id: '3',
    stream: 'stage',
    stage: 'provision',
    state: 'done',
    duration_ms: 1234,
    turn_id: null,
    created_at: at,
  },
  { id: '4', stream: 'stage', stage: 'turn', state: 'started', turn_id: 't1', created_at: at },
  raw('{"type":"system","subtype":"init","session_id":"s1"}\n'),
  ev({ kind: 'session', session_id: 's1' }),
  ev({ kind: 'text', text: "I'll look at the files." }),
  ev({ kind: 'tool_call', id: 'c1', name: 'Bash', input: { command: 'ls -la', description: 'List files' } }),
  ev({ kind: 'tool_result', id: 'c1', is_error: false, output: 'total 0\n' }),
  ev({
    kind: 'tool_call',
    id: 'c2',
    name: 'Edit',
    input: { file_path: '/home/sandbox/a.txt', old_string: 'a' },
  }),
  ev({ kind: 'text', text: 'Editing now.\n' }),
  ev({ kind: 'tool_result', id: 'c2', is_error: true, output: '\nString not found in file\nmore' }),
  ev({ kind: 'raw', line: 'a line the adapter did not know' }),
  ev({ kind: 'error', message: 'rate limited' }),
  ev({ kind: 'text', text: 'Done.' }),
  ev({ kind: 'usage', usage: { input_tokens: 1234, output_tokens: 567 } }),
  ev({ kind: 'usage', usage: { cache_read_tokens: 89, cost_usd: 0.0123 } }),
  {
    id: '9',
    stream: 'stage',
    stage: 'turn',
    state: 'done',
    duration_ms: 4200,
    turn_id: 't1',
    created_at: at,
  },
];

describe('rendering turn events', () => {
  it('shows a turn for a person: text, one line per tool call with its result, errors, raw lines, usage at the end', () => {
    const { out, err, tty } = render('person', TURN, { color: false, events: true });
    assert.equal(
      screen(tty),
      [
        'cloned',
        '✔ provision 1.2s',
        "I'll look at the files.",
        '▸ Bash  ls -la ✓',
        '▸ Edit  /home/sandbox/a.txt',
        'Editing now.',
        '◂ Edit  /home/sandbox/a.txt ✗ String not found in file',
        'a line the adapter did not know',
        'error: rate limited',
        'Done.',
        'tokens in 1,234 · out 567 · cached 89 · $0.0123',
        '✔ turn 4.2s',
        'paddock: the server stopped',
        '',
      ].join('\n'),
    );
    // The agent's words on stdout (a file gets whole lines), the rest on stderr (the clone's
    // output too); the turn's raw stdout is skipped.
    assert.equal(out, "I'll look at the files.\nEditing now.\na line the adapter did not know\nDone.\n");
    assert.ok(screen(err).startsWith('cloned\n'), err);
    assert.ok(!err.includes('"type":"system"') && !out.includes('"type":"system"'));
  });

  it('renders the same as plain lines without colours, and colours tool lines only when asked', () => {
    const { err } = render('plain', TURN, { events: true });
    assert.ok(err.includes('[turn] started\n'), err);
    assert.ok(err.includes('▸ Bash  ls -la ✓\n'), err);
    assert.ok(err.includes('tokens in 1,234 · out 567 · cached 89 · $0.0123\n[turn] done in 4.2s\n'), err);
    assert.ok(!err.includes(ESC));
    const coloured = render('person', TURN, { color: true, events: true });
    assert.ok(coloured.err.includes(`${ESC}[36m▸${ESC}[0m ${ESC}[1mBash${ESC}[0m`));
    assert.ok(coloured.err.includes(`${ESC}[32m✓${ESC}[0m`));
    assert.ok(!coloured.out.includes(ESC), 'never colours on stdout');
  });

  it("shows the turn's raw stdout and no events view without the events option (--raw)", () => {
    const { out } = render(
      'person',
      TURN.filter((e) => e.stream !== 'events'),
      { color: false },
    );
    assert.equal(out, '{"type":"system","subtype":"init","session_id":"s1"}\n');
  });

  it('prints turn events as JSON lines with -o json, exactly as received', () => {
    const { out } = render('json', TURN, { events: true });
    const lines = out
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as unknown);
    assert.deepEqual(lines.slice(0, TURN.length), TURN);
  });

  it('summarises tool input in one line and formats usage', () => {
    assert.equal(toolSummary({ command: 'ls\n  -la' }), 'ls -la');
    assert.equal(toolSummary({ command: ['bash', '-lc', 'npm test'] }), 'bash -lc npm test');
    assert.equal(toolSummary({ other: 1 }), '{"other":1}');
    assert.equal(toolSummary({}), '');
    assert.equal(toolSummary({ command: 'x'.repeat(200) }).length, 80);
    assert.equal(formatUsage({ input_tokens: 1234567, output_tokens: 5 }), 'tokens in 1,234,567 · out 5');
    assert.equal(formatUsage({ cost_usd: 0.5 }), '$0.5000');
    assert.equal(formatUsage({}), '');
  });
});
