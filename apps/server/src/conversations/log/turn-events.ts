// The stored form of a common turn event (TurnEvent, contracts.ts): what the log writer keeps
// as the `data` of an `events` row, and what the readers give back.
//
// What must hold (tests in turn-events.test.ts unless named):
// 1. Every string of an event — text, tool name and id, every key and every string value of
//    the tool input at any depth, tool output, error message, session id, raw line — passes
//    through registry.redact() on its own BEFORE the event is serialised: JSON escaping
//    (quotes, backslashes, \uXXXX) is applied to redacted text only, so it cannot hide a
//    secret from the matcher. Tests: "redacts a secret in every string of every kind of
//    event, at any depth of a tool input", and in conversations.events.test.ts "never stores
//    or sends a secret inside a turn event".
// 2. Only the fields of the TurnEvent shape are kept, with their types: an adapter's stray
//    field never reaches a reader, and every stored event matches the OpenAPI schema.
// 3. A stored event fits one row (maxBytes): strings are cut — after redaction, so a cut never
//    leaves a secret's head in view — until it fits, and `truncated: true` says so.
// 4. Reading back never throws: a row that is not a valid event reads as `{kind: 'raw'}`.
import type { TurnEvent } from '../contracts.ts';
import type { TurnUsage } from '../conversations.tables.ts';
import type { SecretRegistry } from './redactor.ts';

/** A turn event as stored and served: `truncated` when strings were cut to fit one row. */
export type StoredTurnEvent = TurnEvent & { truncated?: true };

/** Deeper tool input is replaced by a placeholder (and the event marked truncated). */
const MAX_DEPTH = 64;
const TOO_DEEP = '[nested too deep]';
/** The successive caps on every string's length while an event does not fit its row. */
const STRING_CAPS = [8192, 2048, 512, 128, 32];
const USAGE_KEYS = ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cost_usd'] as const;

type Str = (value: string) => string;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** JSON values only, every key and string through `str`; `deep` is set when the depth cap cut something. */
function jsonValue(value: unknown, str: Str, depth: number, deep: { hit: boolean }): unknown {
  if (typeof value === 'string') return str(value);
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'boolean' || value === null) return value;
  if (typeof value !== 'object') return null;
  if (depth >= MAX_DEPTH) {
    deep.hit = true;
    return TOO_DEEP;
  }
  if (Array.isArray(value)) return value.map((item) => jsonValue(item, str, depth + 1, deep));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[str(key)] = jsonValue(item, str, depth + 1, deep);
  return out;
}

function usageOf(value: unknown): TurnUsage | null {
  if (!isRecord(value)) return null;
  const usage: TurnUsage = {};
  for (const key of USAGE_KEYS) {
    const n = value[key];
    if (typeof n === 'number' && Number.isFinite(n)) usage[key] = n;
  }
  return usage;
}

/**
 * The event reduced to the TurnEvent shape (invariant 2) with every string through `str`
 * (invariant 1); null when it is not an event of a known kind.
 */
function normalise(value: unknown, str: Str): StoredTurnEvent | null {
  if (!isRecord(value)) return null;
  const s = (key: string): string | null => (typeof value[key] === 'string' ? str(value[key]) : null);
  const id = s('id');
  const withId = id === null ? {} : { id };
  let event: StoredTurnEvent | null = null;
  let truncated = value['truncated'] === true;
  switch (value['kind']) {
    case 'text': {
      const text = s('text');
      if (text !== null) event = { kind: 'text', text };
      break;
    }
    case 'tool_call': {
      const name = s('name');
      const deep = { hit: false };
      const input = jsonValue(value['input'] ?? null, str, 0, deep);
      truncated ||= deep.hit;
      if (name !== null) event = { kind: 'tool_call', ...withId, name, input };
      break;
    }
    case 'tool_result': {
      const output = s('output');
      event = {
        kind: 'tool_result',
        ...withId,
        is_error: value['is_error'] === true,
        output: output ?? '',
      };
      break;
    }
    case 'error': {
      const message = s('message');
      if (message !== null) event = { kind: 'error', message };
      break;
    }
    case 'usage': {
      const usage = usageOf(value['usage']);
      if (usage) event = { kind: 'usage', usage };
      break;
    }
    case 'session': {
      const sessionId = s('session_id');
      if (sessionId !== null) event = { kind: 'session', session_id: sessionId };
      break;
    }
    case 'raw': {
      const line = s('line');
      if (line !== null) event = { kind: 'raw', line };
      break;
    }
  }
  if (event && truncated) event.truncated = true;
  return event;
}

/** `value` cut to at most `max` UTF-16 units (never inside a surrogate pair), `…` marking the cut. */
function cut(value: string, max: number): string {
  if (value.length <= max) return value;
  let end = max;
  const code = value.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return `${value.slice(0, end)}…`;
}

/**
 * The redacted event as the UTF-8 JSON of one `events` row (invariants 1–3). null when the
 * adapter handed something that is not a turn event (nothing is stored).
 */
export function storedEvent(
  event: TurnEvent,
  registry: Pick<SecretRegistry, 'redact' | 'size'>,
  maxBytes: number,
): Buffer | null {
  const redact: Str = (text) => (registry.size === 0 ? text : registry.redact(text).toString('utf8'));
  const clean = normalise(event, redact);
  if (!clean) return null;
  let data = Buffer.from(JSON.stringify(clean));
  if (data.length <= maxBytes) return data;
  for (const cap of STRING_CAPS) {
    const shorter = normalise(clean, (text) => cut(text, cap));
    if (!shorter) return null;
    shorter.truncated = true;
    data = Buffer.from(JSON.stringify(shorter));
    if (data.length <= maxBytes) return data;
  }
  // Still too large with every string short: a tool input of very many values. Keep the call.
  if (clean.kind === 'tool_call') {
    const call: StoredTurnEvent = {
      kind: 'tool_call',
      ...(clean.id === undefined ? {} : { id: cut(clean.id, 128) }),
      name: cut(clean.name, 128),
      input: null,
      truncated: true,
    };
    data = Buffer.from(JSON.stringify(call));
    if (data.length <= maxBytes) return data;
  }
  return null;
}

/** The event of a stored `events` row (invariant 4): never throws. */
export function readStoredEvent(data: Buffer | null): StoredTurnEvent {
  const text = (data ?? Buffer.alloc(0)).toString('utf8');
  try {
    const event = normalise(JSON.parse(text) as unknown, (s) => s);
    if (event) return event;
  } catch {
    // not JSON: read as a raw line below
  }
  return { kind: 'raw', line: text };
}
