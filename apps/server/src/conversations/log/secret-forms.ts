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
// - Wrapped base64 needs no forms of its own: the scan joins the line breaks inside it
//   (byte-automaton.ts, JOIN_RUN). Test: redactor.test.ts "redacts base64 wrapped as the base64
//   command, openssl and MIME print it".
import { joinedText } from './byte-automaton.ts';

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

/** The value with each code point replaced by what `replace` returns for it (itself when null). */
function mapCodePoints(value: string, replace: (codePoint: number, char: string) => string | null): string {
  let out = '';
  for (const char of value) out += replace(char.codePointAt(0)!, char) ?? char;
  return out;
}

const hex = (n: number, width: number, upper: boolean): string => {
  const digits = n.toString(16).padStart(width, '0');
  return upper ? digits.toUpperCase() : digits;
};
const ALPHANUMERIC = /^[A-Za-z0-9]$/;
/** Characters no encoder escapes (URL-unreserved, never special in JSON or HTML). */
const PLAIN = /^[A-Za-z0-9_.-]$/;

/** `\uXXXX` for one code point: a surrogate pair beyond the BMP, as every JSON encoder writes it. */
function jsonUnicode(codePoint: number, upper: boolean): string {
  if (codePoint <= 0xffff) return `\\u${hex(codePoint, 4, upper)}`;
  const v = codePoint - 0x10000;
  return `\\u${hex(0xd800 + (v >> 10), 4, upper)}\\u${hex(0xdc00 + (v & 0x3ff), 4, upper)}`;
}
const JSON_SHORT: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

/**
 * The JSON string escapes the common encoders write, each applied to the whole value: which
 * characters they write as `\uXXXX` (besides the controls every encoder escapes) and whether `/`
 * becomes `\/`. Each is produced with lower- and upper-case hex digits.
 */
const JSON_STYLES: { unicode: (codePoint: number, char: string) => boolean; slash?: boolean }[] = [
  { unicode: () => false }, // JSON.stringify, serde_json, Jackson
  { unicode: (c, ch) => '<>&'.includes(ch) || c === 0x2028 || c === 0x2029 }, // Go encoding/json
  { unicode: (_, ch) => "<>&='".includes(ch) }, // Gson
  { unicode: (c, ch) => '<>&\'"+`'.includes(ch) || c > 0x7e }, // .NET System.Text.Json
  { unicode: (c) => c > 0x7e }, // Python json.dumps, Ruby ascii_only, Java ensure-ASCII
  { unicode: (c) => c > 0x7f, slash: true }, // PHP json_encode
  { unicode: () => false, slash: true }, // PHP JSON_UNESCAPED_UNICODE, Ruby script_safe
  { unicode: (_, ch) => !PLAIN.test(ch) }, // every character but letters, digits and - _ .
];

function jsonForms(value: string): string[] {
  const forms: string[] = [];
  for (const style of JSON_STYLES) {
    for (const upper of [false, true]) {
      forms.push(
        mapCodePoints(value, (c, ch) => {
          if (style.unicode(c, ch)) return jsonUnicode(c, upper);
          if (ch === '/' && style.slash) return '\\/';
          if (JSON_SHORT[ch] !== undefined) return JSON_SHORT[ch]!;
          return c < 0x20 || c === 0x7f ? jsonUnicode(c, upper) : null;
        }),
      );
    }
  }
  return forms;
}

/**
 * URL encodings as the common encoders write them: which ASCII characters they leave as they are
 * (letters and digits always; every other byte of the UTF-8 form becomes %XX) and whether a space
 * becomes `+` (form encoding). Each is produced with upper- and lower-case hex digits.
 */
const URL_STYLES: { keep: string; plus: boolean }[] = [
  { keep: "-_.!~*'()", plus: false }, // encodeURIComponent
  { keep: '-_.~', plus: false }, // RFC 3986: curl, Python quote(safe=''), PHP rawurlencode, Go PathEscape
  { keep: '-_.~', plus: true }, // Go QueryEscape, Python quote_plus
  { keep: '-_.*', plus: true }, // HTML forms (URLSearchParams), Java URLEncoder
  { keep: '-_.', plus: true }, // PHP urlencode
  { keep: '-_.~/', plus: false }, // Python quote (safe='/')
  { keep: '-_.', plus: false }, // every byte but letters, digits and - _ .
];

function urlForms(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const forms: string[] = [];
  for (const style of URL_STYLES) {
    for (const upper of [true, false]) {
      let out = '';
      for (const b of bytes) {
        const ch = String.fromCharCode(b);
        if (b < 0x80 && (ALPHANUMERIC.test(ch) || style.keep.includes(ch))) out += ch;
        else if (b === 0x20 && style.plus) out += '+';
        else out += `%${hex(b, 2, upper)}`;
      }
      forms.push(out);
    }
  }
  return forms;
}

/**
 * HTML and XML escapes as the common escapers write them: the named entities for & < > and " (or
 * numeric ones), the apostrophe in each of its spellings, an escape to ASCII (numeric references
 * for the rest), and the forms with a numeric character reference for every character but
 * letters, digits, - _ . and whitespace (decimal, and hex in both cases).
 */
const HTML_NAMED: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' };
const HTML_STYLES: { quot: string | null; apos: string | null; nonAscii?: (c: number) => string }[] = [
  { quot: '&quot;', apos: '&#39;' }, // Ruby CGI.escapeHTML, Rails, lodash
  { quot: '&quot;', apos: '&#x27;' }, // Python html.escape, Django
  { quot: '&quot;', apos: '&#039;' }, // PHP htmlspecialchars
  { quot: '&quot;', apos: '&apos;' }, // XML, PHP ENT_XML1
  { quot: '&quot;', apos: null }, // Apache Commons escapeHtml4, Jinja's markupsafe
  { quot: null, apos: null }, // text nodes: Python html.escape(quote=False), XML text
  { quot: '&#34;', apos: '&#39;' }, // Go html.EscapeString, html/template
  { quot: '&quot;', apos: '&#x27;', nonAscii: (c) => `&#${c};` }, // escape, then encode to ASCII
];

function htmlForms(value: string): string[] {
  const forms = HTML_STYLES.map((style) =>
    mapCodePoints(value, (c, ch) => {
      if (HTML_NAMED[ch] !== undefined) return HTML_NAMED[ch]!;
      if (ch === '"') return style.quot;
      if (ch === "'") return style.apos;
      return c > 0x7f && style.nonAscii ? style.nonAscii(c) : null;
    }),
  );
  for (const reference of [
    (c: number) => `&#${c};`,
    (c: number) => `&#x${hex(c, 1, false)};`,
    (c: number) => `&#x${hex(c, 1, true)};`,
  ]) {
    forms.push(mapCodePoints(value, (c, ch) => (PLAIN.test(ch) || /\s/.test(ch) ? null : reference(c))));
  }
  return forms;
}

/**
 * Every pattern one secret value is redacted in, deduplicated, each ≥ MIN_SECRET_BYTES:
 * - the value with surrounding whitespace trimmed (the untrimmed value contains it);
 * - each line of a multi-line value (a PEM key or a JSON credential is often printed, split or
 *   re-indented line by line), trimmed;
 * - its base64 forms (stableBase64 at the three alignments, standard and URL-safe alphabets);
 * - its JSON string escapes as the common encoders write them (JSON_STYLES), its URL encodings
 *   (URL_STYLES: percent-encoding in both hex cases, form encoding's `+`) and its HTML/XML
 *   escapes (HTML_STYLES, numeric references); only the forms that differ from the value and from
 *   each other become patterns, so a value of letters, digits and - _ . costs nothing more. Not
 *   produced: letters and digits written as escapes (`\u0061`, `%61`, `&#97;`): no common
 *   encoder writes them, and those forms would triple the automaton (docs/performance.md);
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
  for (const form of jsonForms(trimmed)) forms.add(form);
  forms.add(JSON.stringify(JSON.stringify(trimmed).slice(1, -1)).slice(1, -1));
  for (const form of urlForms(trimmed)) forms.add(form);
  for (const form of htmlForms(trimmed)) forms.add(form);
  const patterns = new Map<string, Buffer>();
  for (const form of forms) {
    // The scan joins a break after a run of base64 characters (byte-automaton.ts): a form of a
    // multi-line value is matched without the breaks the scan would join inside it.
    const bytes = Buffer.from(form, 'utf8');
    const pattern = /[\r\n]/.test(form) ? joinedText(bytes).text : bytes;
    if (pattern.length >= MIN_SECRET_BYTES) patterns.set(pattern.toString('latin1'), pattern);
  }
  return [...patterns.values()];
}
