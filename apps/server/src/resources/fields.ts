// Field schemas shared by the resource domains (environments, vaults, agents, apply,
// conversations, admin): names, ids, env maps, metadata.
// Every string that reaches PostgreSQL is checked for NUL characters here: text and jsonb
// columns refuse them, and that refusal must be a 422, never a 500.
import { z } from 'zod';
import { boundedMap } from '../http/json-bounds.ts';

export const NAME_MAX = 100;
export const METADATA_MAX_BYTES = 16 * 1024;
export const ENV_VAR_NAME_MAX = 128;

/** PostgreSQL text and jsonb refuse NUL characters and unpaired UTF-16 surrogates. */
export const storable = (s: string): boolean => !s.includes('\u0000') && s.isWellFormed();
const NO_NUL = storable;
export const STORABLE_MESSAGE = 'must be valid Unicode text without NUL characters';

/** A string of at most `max` characters with no NUL character. */
export function text(max: number) {
  return z.string().max(max, `must be at most ${max} characters`).refine(NO_NUL, STORABLE_MESSAGE);
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

/** Resource names: the upsert key of bulk apply and the handle the CLI accepts. */
export const resourceName = z
  .string()
  .min(1, 'must not be empty')
  .max(NAME_MAX, `must be at most ${NAME_MAX} characters`)
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]*$/,
    'must start with a letter or digit and contain only letters, digits, ".", "_" and "-"',
  );

export const ENV_VAR_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Names the platform sets itself inside a sandbox. */
export const RESERVED_ENV_PREFIX = 'PADDOCK_';

export function envVarNameProblem(name: string): string | null {
  if (name.length === 0) return 'must not be empty';
  if (name.length > ENV_VAR_NAME_MAX) return `must be at most ${ENV_VAR_NAME_MAX} characters`;
  if (!ENV_VAR_NAME_RE.test(name))
    return 'must be a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)';
  if (name.toUpperCase().startsWith(RESERVED_ENV_PREFIX))
    return `the ${RESERVED_ENV_PREFIX} prefix is reserved for variables set by Paddock`;
  return null;
}

export const envVarName = z.string().superRefine((name, ctx) => {
  const problem = envVarNameProblem(name);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/**
 * A map keyed by environment-variable names with string values. The entry cap and key
 * lengths are checked before any entry (boundedMap); then keys are validated one by one.
 */
export function envMap(valueSchema: z.ZodType<string>, maxEntries: number) {
  return boundedMap(
    z.record(z.string(), valueSchema).superRefine((map, ctx) => {
      for (const k of Object.keys(map)) {
        const problem = envVarNameProblem(k);
        if (problem) ctx.addIssue({ code: 'custom', path: [k], message: `key ${problem}` });
      }
    }),
    { maxEntries, maxKeyLength: ENV_VAR_NAME_MAX },
  );
}

const METADATA_MAX_DEPTH = 10;
const METADATA_TOO_LARGE = 'must be at most 16 KiB as JSON';

function jsonProblem(value: unknown, depth: number): string | null {
  if (depth > METADATA_MAX_DEPTH) return `must not nest deeper than ${METADATA_MAX_DEPTH} levels`;
  if (typeof value === 'string') return NO_NUL(value) ? null : STORABLE_MESSAGE;
  if (value === null || typeof value === 'boolean') return null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : 'numbers must be finite';
  if (Array.isArray(value)) {
    for (const v of value) {
      const p = jsonProblem(v, depth + 1);
      if (p) return p;
    }
    return null;
  }
  if (typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (!NO_NUL(k)) return `keys ${STORABLE_MESSAGE}`;
      const p = jsonProblem(v, depth + 1);
      if (p) return p;
    }
    return null;
  }
  return 'must be JSON';
}

/**
 * Free-form JSON object for external tooling, at most 16 KiB serialized. Size and depth are
 * bounded before the walk and the serialization (boundedMap: a 16 KiB object has fewer
 * than 16 Ki entries and keys shorter than 16 Ki characters).
 */
export const metadata = boundedMap(
  z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
    const problem = jsonProblem(value, 0);
    if (problem) {
      ctx.addIssue({ code: 'custom', message: problem });
      return;
    }
    if (Buffer.byteLength(JSON.stringify(value), 'utf8') > METADATA_MAX_BYTES)
      ctx.addIssue({ code: 'custom', message: METADATA_TOO_LARGE });
  }),
  {
    maxEntries: METADATA_MAX_BYTES / 4,
    maxKeyLength: METADATA_MAX_BYTES,
    maxDepth: METADATA_MAX_DEPTH,
    maxBytes: { bytes: METADATA_MAX_BYTES, message: METADATA_TOO_LARGE },
  },
);

export const timestamps = {
  created_at: z.string().describe('RFC 3339 UTC'),
  updated_at: z.string().describe('RFC 3339 UTC'),
};

/** Params of every `/:id` route. Any string is accepted; a malformed id is simply not found (404). */
export const IdParams = z.object({ id: z.string().max(200) });
