// Rendering a recorded conversation log for a person, as plain lines, and as JSON lines.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRenderer, formatDuration, type LogEvent, type RenderMode } from '../src/render.ts';

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

function render(mode: RenderMode, events: LogEvent[], options = {}) {
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
  it("writes the agent's stdout and stderr bytes untouched to stdout and stderr in every text mode", () => {
    for (const mode of ['person', 'plain'] as const) {
      const { out, err } = render(mode, LOG);
      assert.equal(out, 'installinghello\n', mode);
      assert.ok(err.includes('warn: x\n'), mode);
    }
  });

  it('renders stages for a person: ✔ with the duration, ✖ with the failure message, no spinner left behind', () => {
    const { err } = render('person', LOG, { color: false });
    const lines = screen(err).split('\n');
    assert.ok(lines.includes('✔ provision 1.2s'), err);
    // the setup output ended without a newline: the stage line starts on a line of its own
    assert.ok(lines.includes('✔ setup 80ms'), err);
    assert.ok(lines.includes('✖ turn 1m 02s: exit code 3'), err);
    assert.ok(lines.includes('paddock: the server stopped'), err);
    assert.ok(!err.includes('turn 0ms'), 'no spinner for the turn: its output is the progress');
    assert.ok(err.endsWith('\n'));
  });

  it('colours only when asked, and the person mode clears its spinner line before output', () => {
    const coloured = render('person', LOG, { color: true }).err;
    assert.ok(coloured.includes(`${ESC}[32m✔`));
    assert.ok(coloured.includes(`${ESC}[31m✖`));
    assert.ok(!render('person', LOG, { color: false }).err.includes(`${ESC}[3`));
    const { tty } = render('person', LOG, { color: false });
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
        '', // after "installing" (stdout) the stage line begins a fresh line
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
