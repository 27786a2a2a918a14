// The byte patterns one secret value expands to for redaction: the value itself and the forms
// a program is likely to print it in. Pure functions; no I/O.
// What must hold:
// - A value whose trimmed UTF-8 form is shorter than MIN_SECRET_BYTES (or is only whitespace)
//   expands to nothing: redacting "a", "1" or "true" everywhere would destroy the output and
//   hide nothing worth hiding. Every pattern produced is at least MIN_SECRET_BYTES long.
// - The base64 forms are the characters whose 6 bits come from the value's bytes alone, at the
//   three alignments the value can have inside a larger encoded blob (it starts at offset 0, 1
//   or 2 mod 3), in the standard and the URL-safe alphabets. They do not depend on the bytes
//   around the value, so they appear in ANY base64 text that encodes the value, padded or not.
//   Test: redactor.test.ts "redacts the base64 forms at every alignment in both alphabets".

/** Shorter values are not registered: see the invariant above and docs/secrets.md. */
export const MIN_SECRET_BYTES = 4;

/**
 * The base64 characters that depend only on `value`, when `value` starts at byte offset
 * `alignment` (0, 1 or 2) of an encoded blob. Character k covers bits [6k, 6k + 6) of the blob;
 * the value covers bits [8a, 8(a + n)). Empty when the value is too short to fill one character.
 */
export function stableBase64(value: Uint8Array, alignment: 0 | 1 | 2): string {
  const first = Math.ceil((8 * alignment) / 6);
  const end = Math.floor((8 * (alignment + value.length)) / 6);
  if (end <= first) return '';
  const blob = Buffer.alloc(alignment + value.length);
  blob.set(value, alignment);
  return blob.toString('base64').slice(first, end);
}

const toUrlSafe = (base64: string): string => base64.replaceAll('+', '-').replaceAll('/', '_');

/**
 * Every pattern one secret value is redacted in, deduplicated, each ≥ MIN_SECRET_BYTES:
 * - the value with surrounding whitespace trimmed (the untrimmed value contains it);
 * - each line of a multi-line value (a PEM key or a JSON credential is often printed, split or
 *   re-indented line by line), trimmed;
 * - its base64 forms (stableBase64 at the three alignments, standard and URL-safe alphabets);
 * - its JSON string-escaped form and its URL-encoded (encodeURIComponent) form, when they
 *   differ from the value: both cost nothing for the common value that has nothing to escape;
 * - its JSON string-escaped form escaped once more: a JSON document that holds the value,
 *   printed inside a JSON line — what a runtime's stream-json prints for a tool result that
 *   shows a config file (test: redactor.test.ts "redacts a secret JSON-escaped twice").
 */
export function secretForms(value: string): Buffer[] {
  const trimmed = value.trim();
  const bytes = Buffer.from(trimmed, 'utf8');
  if (bytes.length < MIN_SECRET_BYTES) return [];
  const forms = new Set<string>([trimmed]);
  if (/[\r\n]/.test(trimmed)) {
    for (const line of trimmed.split(/\r?\n|\r/)) forms.add(line.trim());
  }
  for (const alignment of [0, 1, 2] as const) {
    const standard = stableBase64(bytes, alignment);
    forms.add(standard);
    forms.add(toUrlSafe(standard));
  }
  const escaped = JSON.stringify(trimmed).slice(1, -1);
  forms.add(escaped);
  forms.add(JSON.stringify(escaped).slice(1, -1));
  forms.add(encodeURIComponent(trimmed));
  const patterns: Buffer[] = [];
  for (const form of forms) {
    const pattern = Buffer.from(form, 'utf8');
    if (pattern.length >= MIN_SECRET_BYTES) patterns.push(pattern);
  }
  return patterns;
}
