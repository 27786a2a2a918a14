// An output row's SSE frame in parts (the shared tail's encoding) is byte for byte the frame the
// replay path writes whole.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LogEventRow } from '../log/log-events.repo.ts';
import { logEventFrame, logEventFrameParts } from './stream.routes.ts';

const row = (over: Partial<LogEventRow>): LogEventRow => ({
  id: '42',
  turn_id: null,
  stream: 'stdout',
  data: Buffer.from('hello\n'),
  stage: null,
  state: null,
  duration_ms: null,
  message: null,
  created_at: new Date('2026-11-26T12:00:00.123Z'),
  ...over,
});

const joined = (parts: string | readonly string[]): string =>
  typeof parts === 'string' ? parts : parts.join('');

describe('logEventFrameParts', () => {
  it('equals logEventFrame for output rows, whatever their text holds', () => {
    const texts = [
      '',
      'plain line\n',
      'quotes " and \\ backslashes, tabs\tand\r\nCRLF',
      'control \u0000\u0001\u001f and unicode é ✓ 𝄞',
      '}\n\nid: 7\nevent: stdout\ndata: {"forged":true}\n\n',
    ];
    for (const stream of ['stdout', 'stderr'] as const) {
      for (const text of texts) {
        for (const turn_id of [null, '0190abcd-0000-7000-8000-000000000001']) {
          const r = row({ stream, turn_id, data: Buffer.from(text) });
          const parts = logEventFrameParts(r);
          assert.ok(Array.isArray(parts), 'an output row comes in parts');
          assert.equal(joined(parts), logEventFrame(r));
        }
      }
    }
    // Invalid UTF-8 decodes the same way on both paths.
    const invalid = row({ data: Buffer.from([0x61, 0xff, 0xc3, 0x62]) });
    assert.equal(joined(logEventFrameParts(invalid)), logEventFrame(invalid));
  });

  it('gives stage rows whole', () => {
    const r = row({ stream: 'stage', data: null, stage: 'turn', state: 'started', message: 'go' });
    assert.equal(logEventFrameParts(r), logEventFrame(r));
  });
});
