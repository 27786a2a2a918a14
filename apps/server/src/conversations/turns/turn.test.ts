// The turn's line parser when a turn is re-joined after its owner died (turn.ts invariant 5):
// the replay starts at the session's first byte, and the events the previous owner stored are
// not written again, also when the kill fell between a line's bytes and its events.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TurnEvent } from '../contracts.ts';
import { LineParser } from './turn.ts';

const adapter = { parseLine: (line: string): TurnEvent[] => [{ kind: 'raw', line }] };
const REPLAY = Buffer.from('line 1\nline 2\nline 3\nline 4\n');
/** Bytes up to and including the newline of line `n`. */
const through = (n: number) => REPLAY.indexOf(`line ${n}\n`) + `line ${n}\n`.length;

function replay(storedEvents: number | null, persisted: number, chunkSize: number, byteRule = false) {
  const written: string[] = [];
  const writer = {
    event: (_turnId: string, event: TurnEvent) => {
      if (event.kind === 'raw') written.push(event.line);
    },
  };
  const parser = new LineParser(adapter, writer, 'turn-1', storedEvents);
  if (byteRule) parser.useByteRule();
  let left = persisted;
  for (let at = 0; at < REPLAY.length; at += chunkSize) {
    const chunk = REPLAY.subarray(at, at + chunkSize);
    const stored = Math.min(chunk.length, left);
    left -= stored;
    parser.push(chunk, stored);
  }
  parser.end();
  return written;
}

describe('re-joining a turn: which events the parser writes', () => {
  it('writes exactly the events the previous owner did not store, whatever the chunks', () => {
    for (const chunkSize of [1, 3, 7, REPLAY.length]) {
      // The kill fell after the batch with line 3's bytes and before the one with its event.
      assert.deepEqual(replay(2, through(3), chunkSize), ['line 3', 'line 4'], `chunks of ${chunkSize}`);
      // Bytes and events stored alike.
      assert.deepEqual(replay(3, through(3), chunkSize), ['line 4'], `chunks of ${chunkSize}`);
      // A line cut by the stored bytes: its event once, from the whole line.
      assert.deepEqual(replay(2, through(2) + 3, chunkSize), ['line 3', 'line 4'], `chunks of ${chunkSize}`);
      // Nothing stored yet.
      assert.deepEqual(replay(0, 0, chunkSize), ['line 1', 'line 2', 'line 3', 'line 4']);
    }
  });

  it('falls back to the byte boundary when the replay lacks its head', () => {
    assert.deepEqual(replay(2, through(3), 5, true), ['line 4']);
  });

  it('a new turn (no count) writes every event', () => {
    assert.deepEqual(replay(null, 0, 4), ['line 1', 'line 2', 'line 3', 'line 4']);
  });
});
