// `${VAR}` substitution in agent configs (MCP servers and every other string value).
//   ${NAME}  → the value of NAME in the merged env map (NAME is an env-var name)
//   $$       → a literal $
//   any other $ is kept as written (so "$HOME" or "${1:-x}" reach the process unchanged)
// Recursive through arrays and plain objects (values only; keys are never rewritten).
// Substituted values are not scanned again. Fail-complete: every missing name is reported
// at once, sorted and de-duplicated. Properties: substitution.test.ts.

const TOKEN = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

export class SubstitutionError extends Error {
  readonly missing: readonly string[];
  constructor(missing: readonly string[]) {
    super(`undefined variable(s): ${missing.join(', ')}`);
    this.name = 'SubstitutionError';
    this.missing = missing;
  }
}

export type SubstitutionResult<T> = { ok: true; value: T } | { ok: false; missing: string[] };

function substituteString(
  input: string,
  env: Readonly<Record<string, string>>,
  missing: Set<string>,
): string {
  return input.replace(TOKEN, (match, name: string | undefined) => {
    if (name === undefined) return '$';
    if (Object.hasOwn(env, name)) return env[name] as string;
    missing.add(name);
    return match;
  });
}

function walk(value: unknown, env: Readonly<Record<string, string>>, missing: Set<string>): unknown {
  if (typeof value === 'string') return substituteString(value, env, missing);
  if (Array.isArray(value)) return value.map((v) => walk(v, env, missing));
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = walk(v, env, missing);
    return out;
  }
  return value;
}

/** Substitutes every string in `value`; reports all missing names instead of a partial result. */
export function substitute<T>(value: T, env: Readonly<Record<string, string>>): SubstitutionResult<T> {
  const missing = new Set<string>();
  const out = walk(value, env, missing) as T;
  if (missing.size > 0) return { ok: false, missing: [...missing].sort() };
  return { ok: true, value: out };
}

/** Like substitute, but throws SubstitutionError naming every missing variable. */
export function substituteOrThrow<T>(value: T, env: Readonly<Record<string, string>>): T {
  const result = substitute(value, env);
  if (!result.ok) throw new SubstitutionError(result.missing);
  return result.value;
}

/** Escapes a literal string so that substitution returns it unchanged. */
export function escapeLiteral(text: string): string {
  return text.replaceAll('$', '$$$$');
}
