// Property tests of ${VAR} substitution (fast-check).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { escapeLiteral, SubstitutionError, substitute, substituteOrThrow } from './substitution.ts';

const name = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/);
const env = fc.dictionary(name, fc.string({ maxLength: 12 }), { maxKeys: 6 });
const literal = fc.string({ maxLength: 20 });
/** A template piece: literal text (escaped) or a reference. */
const piece = fc.oneof(
  literal.map((text) => ({ kind: 'text' as const, text })),
  name.map((ref) => ({ kind: 'ref' as const, ref })),
);

/** JSON-like values with strings built from pieces. */
const tree = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: 'small' },
    fc.array(piece, { maxLength: 4 }).map((pieces) => ({ __pieces: pieces })),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('node'), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 5 }), tie('node'), { maxKeys: 3 }),
  ),
})).node;

type Piece = { kind: 'text'; text: string } | { kind: 'ref'; ref: string };
/** A marker object (its key is longer than any generated key) holding a string template. */
const isPieces = (v: unknown): v is { __pieces: Piece[] } =>
  !!v && typeof v === 'object' && Object.hasOwn(v, '__pieces');

/** Turns piece arrays into template strings, and computes the expected result and missing names. */
function render(
  v: unknown,
  e: Record<string, string>,
  missing: Set<string>,
): { template: unknown; expected: unknown } {
  if (isPieces(v)) {
    let template = '';
    let expected = '';
    for (const p of v.__pieces) {
      if (p.kind === 'text') {
        template += escapeLiteral(p.text);
        expected += p.text;
      } else {
        template += `\${${p.ref}}`;
        if (Object.hasOwn(e, p.ref)) expected += e[p.ref];
        else missing.add(p.ref);
      }
    }
    return { template, expected };
  }
  if (Array.isArray(v)) {
    const parts = v.map((x) => render(x, e, missing));
    return { template: parts.map((p) => p.template), expected: parts.map((p) => p.expected) };
  }
  if (v && typeof v === 'object') {
    const t: Record<string, unknown> = {};
    const x: Record<string, unknown> = {};
    for (const [k, val] of Object.entries(v)) {
      const r = render(val, e, missing);
      t[k] = r.template;
      x[k] = r.expected;
    }
    return { template: t, expected: x };
  }
  return { template: v, expected: v };
}

describe('substitution', () => {
  it('leaves strings without "$" unchanged', () => {
    fc.assert(
      fc.property(
        literal.filter((s) => !s.includes('$')),
        env,
        (s, e) => {
          assert.deepEqual(substitute(s, e), { ok: true, value: s });
        },
      ),
    );
  });

  it('round-trips escaped literals: "$$" is a literal "$"', () => {
    fc.assert(
      fc.property(literal, env, (s, e) => {
        assert.deepEqual(substitute(escapeLiteral(s), e), { ok: true, value: s });
      }),
    );
  });

  it('resolves every reference recursively through maps and lists, or reports all missing names at once', () => {
    fc.assert(
      fc.property(tree, env, (t, e) => {
        const missing = new Set<string>();
        const { template, expected } = render(t, e, missing);
        const result = substitute(template, e);
        if (missing.size === 0) assert.deepEqual(result, { ok: true, value: expected });
        else assert.deepEqual(result, { ok: false, missing: [...missing].sort() });
      }),
    );
  });

  it('does not rescan substituted values', () => {
    fc.assert(
      fc.property(name, literal, (n, v) => {
        const e = { [n]: `${v}\${${n}}$$` };
        assert.deepEqual(substitute(`\${${n}}`, e), { ok: true, value: e[n] });
      }),
    );
  });

  it('never rewrites keys and keeps non-string values as they are', () => {
    const value = { '${A}': ['${A}', 1, true, null, { nested: '$${A} costs $5' }] };
    assert.deepEqual(substitute(value, { A: 'x' }), {
      ok: true,
      value: { '${A}': ['x', 1, true, null, { nested: '${A} costs $5' }] },
    });
  });

  it('substituteOrThrow names every missing variable', () => {
    assert.throws(
      () => substituteOrThrow({ a: '${B}', b: ['${A}', '${B}', '${C}'] }, { C: '' }),
      (err: unknown) => err instanceof SubstitutionError && err.missing.join() === 'A,B',
    );
  });
});
