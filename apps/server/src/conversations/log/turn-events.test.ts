// The stored form of a turn event: redacted string by string, reduced to its shape, fitted to
// one row, read back without ever throwing.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TurnEvent } from '../contracts.ts';
import { createSecretRegistry, REDACTION_MARKER } from './redactor.ts';
import { readStoredEvent, storedEvent } from './turn-events.ts';

// Quotes and backslashes: its JSON-escaped form differs from the value.
const SECRET = 'zq9K"pass\\word/\'tok-7731';
const ESCAPED = JSON.stringify(SECRET).slice(1, -1);

function registry() {
  const r = createSecretRegistry();
  assert.ok(r.register(SECRET));
  return r;
}

const json = (event: TurnEvent, maxBytes = 32 * 1024) => {
  const data = storedEvent(event, registry(), maxBytes);
  assert.ok(data, 'stored');
  return data.toString('utf8');
};

describe('the stored form of a turn event', () => {
  it('redacts a secret in every string of every kind of event, at any depth of a tool input', () => {
    const events: TurnEvent[] = [
      { kind: 'text', text: `the key is ${SECRET}.` },
      {
        kind: 'tool_call',
        id: `call-${SECRET}`,
        name: 'Bash',
        input: {
          command: `curl -H "Authorization: Bearer ${SECRET}" https://x`,
          nested: [{ deeper: { deepest: [`${SECRET}`] } }],
          [SECRET]: 'as a key',
        },
      },
      { kind: 'tool_result', id: 'call-1', is_error: false, output: `TOKEN=${SECRET}\n` },
      { kind: 'error', message: `auth failed for ${SECRET}` },
      { kind: 'session', session_id: SECRET },
      { kind: 'raw', line: JSON.stringify({ leaked: SECRET }) },
    ];
    for (const event of events) {
      const stored = json(event);
      assert.ok(!stored.includes(SECRET), `${event.kind}: the secret as it is`);
      assert.ok(!stored.includes(ESCAPED), `${event.kind}: the secret JSON-escaped`);
      assert.ok(stored.includes(REDACTION_MARKER), `${event.kind}: a marker in its place`);
      assert.equal(JSON.parse(stored).kind, event.kind);
    }
  });

  it('keeps only the fields of the event shape, with their types', () => {
    const stray = {
      kind: 'tool_result',
      id: 7,
      is_error: 'yes',
      output: 'ok',
      extra: 'dropped',
    } as unknown as TurnEvent;
    assert.deepEqual(JSON.parse(json(stray)), { kind: 'tool_result', is_error: false, output: 'ok' });
    const usage = {
      kind: 'usage',
      usage: { input_tokens: 12, output_tokens: Number.NaN, cost_usd: 0.5, other: 3 },
    } as unknown as TurnEvent;
    assert.deepEqual(JSON.parse(json(usage)), { kind: 'usage', usage: { input_tokens: 12, cost_usd: 0.5 } });
    assert.equal(storedEvent({ kind: 'nonsense' } as unknown as TurnEvent, registry(), 1024), null);
    assert.equal(storedEvent({ kind: 'text' } as unknown as TurnEvent, registry(), 1024), null);
  });

  it('cuts a large event to fit one row, after redaction, and marks it truncated', () => {
    // The secret sits across the first cut: cutting before redacting would leave its head.
    const output = `${'x'.repeat(8190)}${SECRET}${'y'.repeat(60_000)}`;
    const stored = json({ kind: 'tool_result', is_error: true, output });
    assert.ok(Buffer.byteLength(stored) <= 32 * 1024);
    const event = JSON.parse(stored);
    assert.equal(event.truncated, true);
    assert.equal(event.is_error, true);
    assert.ok(!stored.includes(SECRET.slice(0, 4)), 'no head of the secret');
    // Multi-byte text is cut between characters, never inside a surrogate pair.
    const emoji = json({ kind: 'text', text: '😀'.repeat(20_000) }, 4096);
    assert.doesNotThrow(() => new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(emoji)));
    assert.ok(!JSON.parse(emoji).text.includes('\ufffd'));
    // A tool input of very many small values keeps the call, without its input.
    const many = json(
      { kind: 'tool_call', name: 'Write', input: Array.from({ length: 20_000 }, (_, i) => i) },
      4096,
    );
    assert.deepEqual(JSON.parse(many), { kind: 'tool_call', name: 'Write', input: null, truncated: true });
  });

  it('replaces tool input nested deeper than the cap', () => {
    let input: unknown = 'leaf';
    for (let i = 0; i < 200; i++) input = { a: input };
    const event = JSON.parse(json({ kind: 'tool_call', name: 'Deep', input }));
    assert.equal(event.truncated, true);
    assert.match(JSON.stringify(event.input), /nested too deep/);
  });

  it('reads back a row that is not a valid event as a raw line, never throwing', () => {
    assert.deepEqual(readStoredEvent(Buffer.from('not json')), { kind: 'raw', line: 'not json' });
    assert.deepEqual(readStoredEvent(Buffer.from('{"kind":"mystery"}')), {
      kind: 'raw',
      line: '{"kind":"mystery"}',
    });
    assert.deepEqual(readStoredEvent(null), { kind: 'raw', line: '' });
    assert.deepEqual(readStoredEvent(Buffer.from('{"kind":"text","text":"hi"}')), {
      kind: 'text',
      text: 'hi',
    });
  });
});
