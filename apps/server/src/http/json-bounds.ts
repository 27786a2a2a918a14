// Size checks that run before any per-entry work (issue 14, finding 1). A JSON body is cheap
// to parse but expensive to validate entry by entry: 300,000 map entries once held the event
// loop for 7 s and answered a 21 MB error. What must hold (api-hardening.flood.test.ts):
// - Every parsed body passes jsonShapeProblem (a preValidation hook in app.ts) before its
//   schema runs: bounded depth, entries per object or array, key length and total values.
//   The walk is iterative (no recursion on attacker-chosen depth) and stops at the first
//   problem, so its cost is linear in the body and never depends on the schema.
// - Map fields (env_vars, packages, mcp_servers, metadata) check their own caps first too,
//   through boundedMap in the schemas, so a refusal names the field with one problem.
// - An error lists at most MAX_LISTED_PROBLEMS problems (capFieldErrors), with short
//   messages and paths, so an error answer stays small whatever the body.
import { z } from 'zod';
import type { FieldErrors } from './errors.ts';

export const JSON_BOUNDS = {
  /** Objects and arrays nested inside each other. */
  maxDepth: 32,
  /** Entries of one object or array: above every cap a schema declares (apply: 500 resources). */
  maxEntries: 1000,
  /** Characters of one object key. */
  maxKeyLength: 1024,
  /** Values of every kind in the whole body. */
  maxValues: 50_000,
} as const;

export const MAX_LISTED_PROBLEMS = 20;
const MAX_MESSAGE_LENGTH = 500;
const MAX_PATH_LENGTH = 200;

export interface ShapeProblem {
  path: string;
  message: string;
}

const isContainer = (v: unknown): v is object => typeof v === 'object' && v !== null;

const QUOTE = 34;
const BACKSLASH = 92;
const COLON = 58;
const COMMA = 44;
const OPEN_OBJECT = 123;
const CLOSE_OBJECT = 125;
const OPEN_ARRAY = 91;
const CLOSE_ARRAY = 93;
/** A key's bytes in JSON text: at most 6 (\uXXXX) per UTF-16 unit of the decoded key. */
const MAX_KEY_BYTES_PER_UNIT = 6;
const PATH_KEY_BYTES = 100;

interface ScanLevel {
  isArray: boolean;
  path: string;
  commas: number;
  nonEmpty: boolean;
  key: string;
}

export interface JsonShapeScanner {
  /** Scans the next bytes; returns the first problem found so far, or null. */
  write(chunk: Uint8Array): ShapeProblem | null;
}

/**
 * Finds the first bound a JSON text breaks without parsing it, chunk by chunk as the body
 * arrives: a body of a million entries is refused after its first thousand, long before it
 * would be built into objects (JSON.parse of 300,000 keys alone takes a third of a second).
 * Works on UTF-8 bytes: every structural character is ASCII and no byte of a multi-byte
 * sequence is. Text that is not valid JSON is left to the parser, which refuses it itself.
 */
export function createJsonShapeScanner(bounds = JSON_BOUNDS): JsonShapeScanner {
  const stack: ScanLevel[] = [];
  let values = 1;
  let inString = false;
  let escaped = false;
  let stringBytes = 0;
  let stringHead: number[] = [];
  let lastString = '';
  let keyTooLong = false;
  let problem: ShapeProblem | null = null;
  const maxKeyBytes = bounds.maxKeyLength * MAX_KEY_BYTES_PER_UNIT;

  const scan = (bytes: Uint8Array): ShapeProblem | null => {
    for (let i = 0; i < bytes.length; i++) {
      const c = bytes[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === BACKSLASH) escaped = true;
        else if (c === QUOTE) {
          inString = false;
          lastString = Buffer.from(stringHead).toString('utf8');
          const top = stack[stack.length - 1];
          keyTooLong = !!top && !top.isArray && stringBytes > maxKeyBytes;
          continue;
        }
        stringBytes += 1;
        if (stringHead.length < PATH_KEY_BYTES) stringHead.push(c);
        continue;
      }
      if (c === 32 || c === 10 || c === 13 || c === 9) continue;
      const top = stack[stack.length - 1];
      if (top && c !== CLOSE_OBJECT && c !== CLOSE_ARRAY) top.nonEmpty = true;
      if (c === QUOTE) {
        inString = true;
        stringBytes = 0;
        stringHead = [];
      } else if (c === COLON) {
        if (!top) continue;
        // Too long for a key of any decoding; a long string value is the schema's business.
        if (keyTooLong)
          return { path: top.path, message: `keys must be at most ${bounds.maxKeyLength} characters` };
        top.key = lastString;
      } else if (c === COMMA) {
        if (!top) continue;
        top.commas += 1;
        values += 1;
        if (top.commas + 1 > bounds.maxEntries) {
          return { path: top.path, message: `must have at most ${bounds.maxEntries} entries` };
        }
        if (values > bounds.maxValues) {
          return { path: top.path, message: `the body must hold at most ${bounds.maxValues} values in all` };
        }
      } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        const path = top
          ? `${top.path === '' ? '' : `${top.path}.`}${top.isArray ? top.commas : top.key}`
          : '';
        if (stack.length + 1 > bounds.maxDepth) {
          return { path, message: `must not nest deeper than ${bounds.maxDepth} levels` };
        }
        stack.push({ isArray: c === OPEN_ARRAY, path, commas: 0, nonEmpty: false, key: '' });
      } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        const closed = stack.pop();
        if (closed?.nonEmpty) values += 1;
      }
    }
    return null;
  };

  return {
    write(chunk) {
      problem ??= scan(chunk);
      return problem;
    },
  };
}

/** The first bound a whole JSON text breaks, or null (createJsonShapeScanner in one go). */
export function scanJsonShape(text: string, bounds = JSON_BOUNDS): ShapeProblem | null {
  return createJsonShapeScanner(bounds).write(Buffer.from(text, 'utf8'));
}

/** The first bound the value breaks, or null. Linear in the value, stops at the first problem. */
export function jsonShapeProblem(value: unknown, bounds = JSON_BOUNDS): ShapeProblem | null {
  if (!isContainer(value)) return null;
  const stack: Array<{ value: object; depth: number; path: string }> = [{ value, depth: 1, path: '' }];
  let values = 1;
  const at = (path: string, key: string) => (path === '' ? key : `${path}.${key}`);
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.depth > bounds.maxDepth) {
      return { path: node.path, message: `must not nest deeper than ${bounds.maxDepth} levels` };
    }
    const keys = Array.isArray(node.value) ? null : Object.keys(node.value);
    const count = keys === null ? (node.value as unknown[]).length : keys.length;
    if (count > bounds.maxEntries) {
      return { path: node.path, message: `must have at most ${bounds.maxEntries} entries` };
    }
    values += count;
    if (values > bounds.maxValues) {
      return { path: node.path, message: `the body must hold at most ${bounds.maxValues} values in all` };
    }
    if (keys === null) {
      (node.value as unknown[]).forEach((child, i) => {
        if (isContainer(child))
          stack.push({ value: child, depth: node.depth + 1, path: at(node.path, String(i)) });
      });
      continue;
    }
    for (const key of keys) {
      if (key.length > bounds.maxKeyLength) {
        return { path: node.path, message: `keys must be at most ${bounds.maxKeyLength} characters` };
      }
      const child = (node.value as Record<string, unknown>)[key];
      if (isContainer(child)) stack.push({ value: child, depth: node.depth + 1, path: at(node.path, key) });
    }
  }
  return null;
}

export interface MapBounds {
  maxEntries: number;
  maxKeyLength: number;
  /** Nesting below the map itself (metadata); omit for flat maps. */
  maxDepth?: number;
  /** A cap on the JSON size; checked here against a lower bound, exactly by the schema. */
  maxBytes?: { bytes: number; message: string };
}

/** Lower bound of the JSON size of a value, giving up (returning Infinity) past `limit`. */
function jsonSizeAtLeast(value: unknown, limit: number, maxDepth: number): number | 'too_deep' {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  let size = 0;
  while (stack.length > 0 && size <= limit) {
    const node = stack.pop()!;
    const v = node.value;
    if (typeof v === 'string') size += v.length + 2;
    else if (!isContainer(v)) size += 1;
    else {
      if (node.depth > maxDepth) return 'too_deep';
      size += 2;
      if (Array.isArray(v)) for (const c of v) stack.push({ value: c, depth: node.depth + 1 });
      else
        for (const [k, c] of Object.entries(v)) {
          size += k.length + 3;
          stack.push({ value: c, depth: node.depth + 1 });
        }
    }
  }
  return size;
}

/**
 * A map schema whose size caps are checked before the map's entries are: one problem for
 * the whole field instead of one per entry. Anything that is not a plain object is left to
 * the schema, which refuses it with its own message.
 */
export function boundedMap<T extends z.ZodType>(schema: T, bounds: MapBounds) {
  return z.preprocess((value, ctx) => {
    if (!isContainer(value) || Array.isArray(value)) return value;
    const problem = (message: string) => {
      ctx.issues.push({ code: 'custom', message, input: value });
      return value;
    };
    const keys = Object.keys(value);
    if (keys.length > bounds.maxEntries) return problem(`must have at most ${bounds.maxEntries} entries`);
    if (keys.some((k) => k.length > bounds.maxKeyLength)) {
      return problem(`keys must be at most ${bounds.maxKeyLength} characters`);
    }
    if (bounds.maxDepth !== undefined || bounds.maxBytes !== undefined) {
      const size = jsonSizeAtLeast(value, bounds.maxBytes?.bytes ?? Infinity, bounds.maxDepth ?? Infinity);
      if (size === 'too_deep') return problem(`must not nest deeper than ${bounds.maxDepth} levels`);
      if (bounds.maxBytes && size > bounds.maxBytes.bytes) return problem(bounds.maxBytes.message);
    }
    return value;
  }, schema);
}

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/**
 * At most MAX_LISTED_PROBLEMS problems, messages and field names clipped; `more_errors`
 * counts what was left out. Accepts problems one by one so a caller can stop early.
 */
export function createProblemList() {
  const errors: FieldErrors = {};
  let listed = 0;
  let more = 0;
  return {
    add(field: string, message: string): void {
      if (listed >= MAX_LISTED_PROBLEMS) {
        more += 1;
        return;
      }
      listed += 1;
      const f = clip(field, MAX_PATH_LENGTH);
      errors[f] = [...(errors[f] ?? []), clip(message, MAX_MESSAGE_LENGTH)];
    },
    result(): { errors: FieldErrors; more_errors?: number } {
      return more > 0 ? { errors, more_errors: more } : { errors };
    },
  };
}

/** FieldErrors capped as createProblemList caps them. */
export function capFieldErrors(errors: FieldErrors): { errors: FieldErrors; more_errors?: number } {
  const list = createProblemList();
  for (const [field, messages] of Object.entries(errors)) for (const m of messages) list.add(field, m);
  return list.result();
}
