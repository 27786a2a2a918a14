// The SSE parser against recorded stream text, fed in every possible split.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSseParser, type SseEvent } from '../src/sse.ts';

const RECORDED = [
  ': connected',
  '',
  'id: 41',
  'event: stage',
  'data: {"id":"41","stream":"stage","stage":"provision","state":"started","turn_id":null}',
  '',
  ': heartbeat',
  '',
  'id: 42',
  'event: stdout',
  'data: {"id":"42","stream":"stdout","text":"héllo ✔\\n","turn_id":"t1"}',
  '',
  'event: owner_lost',
  'data: {}',
  '',
  'data: line one',
  'data: line two',
  '',
  'event: end',
  'data: {}',
  '',
  '',
].join('\n');

function parseAll(chunks: Uint8Array[]): { events: SseEvent[]; comments: string[] } {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const parser = createSseParser({ event: (e) => events.push(e), comment: (c) => comments.push(c) });
  for (const c of chunks) parser.push(c);
  return { events, comments };
}

const EXPECTED: SseEvent[] = [
  {
    id: '41',
    event: 'stage',
    data: '{"id":"41","stream":"stage","stage":"provision","state":"started","turn_id":null}',
  },
  { id: '42', event: 'stdout', data: '{"id":"42","stream":"stdout","text":"héllo ✔\\n","turn_id":"t1"}' },
  // the last event id persists until the server sends another (the SSE spec)
  { id: '42', event: 'owner_lost', data: '{}' },
  { id: '42', event: 'message', data: 'line one\nline two' },
  { id: '42', event: 'end', data: '{}' },
];

describe('SSE parser', () => {
  it('yields the recorded events whole, with comments, whatever the split (also inside a UTF-8 character)', () => {
    const bytes = Buffer.from(RECORDED, 'utf8');
    for (let cut = 0; cut <= bytes.length; cut++) {
      const { events, comments } = parseAll([bytes.subarray(0, cut), bytes.subarray(cut)]);
      assert.deepEqual(events, EXPECTED, `split at byte ${cut}`);
      assert.deepEqual(comments, ['connected', 'heartbeat']);
    }
    const oneByOne = parseAll([...bytes].map((b) => Uint8Array.of(b)));
    assert.deepEqual(oneByOne.events, EXPECTED);
  });

  it('accepts CRLF and CR line ends, also with CR and LF in different reads', () => {
    for (const eol of ['\r\n', '\r']) {
      const bytes = Buffer.from(RECORDED.replaceAll('\n', eol), 'utf8');
      for (let cut = 0; cut <= bytes.length; cut++) {
        const { events } = parseAll([bytes.subarray(0, cut), bytes.subarray(cut)]);
        assert.deepEqual(events, EXPECTED, `${JSON.stringify(eol)} split at ${cut}`);
      }
    }
  });

  it('dispatches nothing for an event cut off before its blank line', () => {
    const { events } = parseAll([Buffer.from('id: 7\nevent: stdout\ndata: {"text":"par')]);
    assert.deepEqual(events, []);
  });
});
