// The redaction of sandbox output, through the public API only: bytes in, bytes out.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { joinedText } from './byte-automaton.ts';
import {
  createSecretRegistry,
  MIN_SECRET_BYTES,
  REDACTION_MARKER,
  type SecretRegistry,
  type StreamRedactor,
} from './redactor.ts';
import { secretForms, stableBase64 } from './secret-forms.ts';

/** mulberry32: a small seeded PRNG, so a failure reproduces. */
function prng(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function registryOf(...values: string[]): SecretRegistry {
  const registry = createSecretRegistry();
  for (const value of values) assert.ok(registry.register(value), `registers ${value}`);
  return registry;
}

/**
 * Writes every chunk, alternately through write() and writeParts() (each of whose parts counts
 * as a piece), then flushes; returns every output piece and their concatenation.
 */
function pass(stream: StreamRedactor, chunks: Uint8Array[]): { pieces: Buffer[]; all: Buffer } {
  const pieces = chunks.flatMap((chunk, k) =>
    k % 2 === 0 ? [stream.write(chunk)] : stream.writeParts(chunk),
  );
  pieces.push(stream.flush());
  return { pieces, all: Buffer.concat(pieces) };
}

/** Splits `data` at the given offsets. */
const splitAt = (data: Buffer, offsets: number[]): Buffer[] =>
  [0, ...offsets, data.length].slice(1).map((end, k, ends) => data.subarray(k === 0 ? 0 : ends[k - 1], end));

/**
 * The expected output, computed naively: every occurrence of every form (indexOf from each
 * offset), unioned where they overlap, each region replaced by one marker.
 */
function reference(values: string[], input: Buffer): Buffer {
  // The forms are matched in the input without the line breaks the scan joins (wrapped base64).
  const { text, offsets } = joinedText(input);
  const regions: [number, number][] = [];
  for (const form of values.flatMap((v) => secretForms(v))) {
    for (let at = text.indexOf(form); at !== -1; at = text.indexOf(form, at + 1)) {
      regions.push([offsets[at]!, offsets[at + form.length - 1]! + 1]);
    }
  }
  regions.sort((a, b) => a[0] - b[0]);
  const out: Buffer[] = [];
  let done = 0;
  let open: [number, number] | undefined;
  for (const [s, e] of regions) {
    if (open && s < open[1]) open[1] = Math.max(open[1], e);
    else {
      if (open) {
        out.push(input.subarray(done, open[0]), Buffer.from(REDACTION_MARKER));
        done = open[1];
      }
      open = [s, e];
    }
  }
  if (open) {
    out.push(input.subarray(done, open[0]), Buffer.from(REDACTION_MARKER));
    done = open[1];
  }
  out.push(input.subarray(done));
  return Buffer.concat(out);
}

const BASE64_RUN = /[A-Za-z0-9+/=_-]+/g;

/** Independent check: no base64 run of `output`, decoded at any offset, holds `secret`. */
function assertNoBase64Of(output: string, secret: string, message: string): void {
  const needle = Buffer.from(secret);
  for (const run of output.match(BASE64_RUN) ?? []) {
    for (const alphabet of ['base64', 'base64url'] as const) {
      for (let shift = 0; shift < 4; shift++) {
        const decoded = Buffer.from(run.slice(shift), alphabet);
        assert.equal(decoded.indexOf(needle), -1, `${message}: ${secret} decodable from ${run}`);
      }
    }
  }
}

/** Independent check for wrapped output: no 6 bytes of `secret` decodable once lines are joined. */
function assertNoPieceOfWrapped(output: string, secret: Buffer, message: string): void {
  const runs = output.replace(/\r?\n/g, '').match(BASE64_RUN) ?? [];
  for (const run of runs) {
    for (const alphabet of ['base64', 'base64url'] as const) {
      for (let shift = 0; shift < 4; shift++) {
        const decoded = Buffer.from(run.slice(shift), alphabet);
        for (let at = 0; at + 6 <= secret.length; at++) {
          assert.equal(
            decoded.indexOf(secret.subarray(at, at + 6)),
            -1,
            `${message}: bytes ${at}… decodable`,
          );
        }
      }
    }
  }
}

/** How the common tools print base64: wrapped, each at its own width and line end. */
const WRAPPERS: { name: string; wrap: (data: Buffer) => string }[] = [
  { name: 'base64 (76 columns)', wrap: (data) => execFileSync('base64', [], { input: data }).toString() },
  { name: 'base64 -w 64', wrap: (data) => execFileSync('base64', ['-w', '64'], { input: data }).toString() },
  { name: 'base64 -w 60', wrap: (data) => execFileSync('base64', ['-w', '60'], { input: data }).toString() },
  {
    name: 'basenc --base64url',
    wrap: (data) => execFileSync('basenc', ['--base64url'], { input: data }).toString(),
  },
  {
    name: 'openssl base64 (64)',
    wrap: (data) => execFileSync('openssl', ['base64'], { input: data }).toString(),
  },
  {
    name: 'MIME (76, CRLF)',
    wrap: (data) =>
      `${
        data
          .toString('base64')
          .match(/.{1,76}/g)
          ?.join('\r\n') ?? ''
      }\r\n`,
  },
];

/** Independent encoders, written the way the common libraries write their output. */
const codeUnits = (value: string, escaped: (unit: number) => boolean, upper = false): string =>
  value
    .split('') // UTF-16 code units: a character beyond the BMP becomes its surrogate pair
    .map((c) => {
      const unit = c.charCodeAt(0);
      if (!escaped(unit)) return c;
      const digits = unit.toString(16).padStart(4, '0');
      return `\\u${upper ? digits.toUpperCase() : digits}`;
    })
    .join('');
const inner = (value: string): string => JSON.stringify(value).slice(1, -1);
const ENCODERS: { name: string; encode: (value: string) => string; decode: (text: string) => string }[] = [
  {
    name: 'Go encoding/json',
    encode: (v) => inner(v).replace(/[<>&\u2028\u2029]/g, (c) => codeUnits(c, () => true)),
    decode: (t) => JSON.parse(`"${t}"`),
  },
  {
    name: 'PHP json_encode',
    encode: (v) => codeUnits(inner(v).replaceAll('/', '\\/'), (u) => u > 0x7f),
    decode: (t) => JSON.parse(`"${t}"`),
  },
  {
    name: 'Python json.dumps',
    encode: (v) => codeUnits(inner(v), (u) => u > 0x7e),
    decode: (t) => JSON.parse(`"${t}"`),
  },
  {
    name: '.NET System.Text.Json',
    encode: (v) =>
      codeUnits(
        v.replaceAll('\\', '\\\\'),
        (u) => u > 0x7e || '<>&\'"+`'.includes(String.fromCharCode(u)),
        true,
      ),
    decode: (t) => JSON.parse(`"${t}"`),
  },
  {
    name: 'Gson',
    encode: (v) => inner(v).replace(/[<>&=']/g, (c) => codeUnits(c, () => true)),
    decode: (t) => JSON.parse(`"${t}"`),
  },
  {
    name: 'URLSearchParams (form encoding)',
    encode: (v) => new URLSearchParams({ k: v }).toString().slice(2),
    decode: (t) => decodeURIComponent(t.replaceAll('+', ' ')),
  },
  {
    name: 'percent-encoding, lower-case hex',
    encode: (v) => encodeURIComponent(v).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    decode: (t) => decodeURIComponent(t),
  },
  {
    name: 'Python quote_plus',
    encode: (v) =>
      encodeURIComponent(v)
        .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
        .replaceAll('%20', '+'),
    decode: (t) => decodeURIComponent(t.replaceAll('+', ' ')),
  },
  ...[
    ['&#39;', 'Rails'],
    ['&#x27;', 'Python html.escape'],
    ['&#039;', 'PHP htmlspecialchars'],
    ['&apos;', 'XML'],
  ].map(([apos, name]) => ({
    name: name!,
    encode: (v: string) =>
      v
        .replaceAll('&', '&amp;')
        .replaceAll('<', '&lt;')
        .replaceAll('>', '&gt;')
        .replaceAll('"', '&quot;')
        .replaceAll("'", apos!),
    decode: decodeHtml,
  })),
  {
    name: 'Go html.EscapeString',
    encode: (v) =>
      v
        .replaceAll('&', '&amp;')
        .replaceAll('<', '&lt;')
        .replaceAll('>', '&gt;')
        .replaceAll('"', '&#34;')
        .replaceAll("'", '&#39;'),
    decode: decodeHtml,
  },
  {
    name: 'decimal character references',
    encode: (v) => [...v].map((c) => (/[A-Za-z0-9_.\s-]/.test(c) ? c : `&#${c.codePointAt(0)};`)).join(''),
    decode: decodeHtml,
  },
  {
    name: 'hex character references',
    encode: (v) =>
      [...v]
        .map((c) => (/[A-Za-z0-9_.\s-]/.test(c) ? c : `&#x${c.codePointAt(0)!.toString(16).toUpperCase()};`))
        .join(''),
    decode: decodeHtml,
  },
];

function decodeHtml(text: string): string {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
  return text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, body: string) => {
    if (body[0] !== '#') return named[body] ?? m;
    return String.fromCodePoint(
      body[1] === 'x' || body[1] === 'X' ? Number.parseInt(body.slice(2), 16) : Number(body.slice(1)),
    );
  });
}

describe('redactor', () => {
  it('redacts a secret printed whole', () => {
    const registry = registryOf('sk-live-4f9a1c2e77');
    const { all } = pass(registry.stream(), [Buffer.from('export TOKEN=sk-live-4f9a1c2e77\nok\n')]);
    assert.equal(all.toString(), `export TOKEN=${REDACTION_MARKER}\nok\n`);
    assert.equal(registry.redact('a sk-live-4f9a1c2e77 b').toString(), `a ${REDACTION_MARKER} b`);
  });

  it('redacts a secret split across two writes at every offset', () => {
    const secret = 'ghp_Zq81xWcLm0Ab7YtR';
    const registry = registryOf(secret);
    const input = Buffer.from(`header\n${secret} and again ${secret}\n`);
    const expected = `header\n${REDACTION_MARKER} and again ${REDACTION_MARKER}\n`;
    for (let at = 0; at <= input.length; at++) {
      const { pieces, all } = pass(registry.stream(), splitAt(input, [at]));
      assert.equal(all.toString(), expected, `split at ${at}`);
      for (const piece of pieces) assert.ok(!piece.toString().includes(secret.slice(0, 8)), `split at ${at}`);
    }
  });

  it('redacts a secret split across three or more chunks', () => {
    const secret = 'xoxb-2851-Qk7vP';
    const registry = registryOf(secret);
    const input = Buffer.from(`a${secret}b${secret}${secret}c`);
    const expected = `a${REDACTION_MARKER}b${REDACTION_MARKER}${REDACTION_MARKER}c`;
    for (let i = 0; i <= input.length; i++) {
      for (let j = i; j <= input.length; j++) {
        assert.equal(pass(registry.stream(), splitAt(input, [i, j])).all.toString(), expected, `${i},${j}`);
      }
    }
    const bytewise = [...input].map((b) => Buffer.of(b));
    assert.equal(pass(registry.stream(), bytewise).all.toString(), expected);
  });

  it('redacts the base64 forms at every alignment in both alphabets', () => {
    // '~' and '?' make '+' and '/' appear in the standard alphabet, so the URL-safe one differs.
    const secret = 'Tk~~~???>>>9xQ2';
    assert.match(Buffer.from(secret).toString('base64'), /[+/]/);
    const registry = registryOf(secret);
    const random = prng(3);
    for (let before = 0; before < 6; before++) {
      for (let after = 0; after < 6; after++) {
        const blob = Buffer.concat([
          Buffer.from(Array.from({ length: before }, () => random(256))),
          Buffer.from(secret),
          Buffer.from(Array.from({ length: after }, () => random(256))),
        ]);
        for (const encoding of ['base64', 'base64url'] as const) {
          const encoded = blob.toString(encoding);
          const input = Buffer.from(`data: ${encoded}\n`);
          const whole = pass(registry.stream(), [input]).all.toString();
          assert.ok(whole.includes(REDACTION_MARKER), `${encoding} ${before}/${after}: ${whole}`);
          assertNoBase64Of(whole, secret, `${encoding} ${before}/${after}`);
          for (let at = 0; at <= input.length; at++) {
            assert.equal(
              pass(registry.stream(), splitAt(input, [at])).all.toString(),
              whole,
              `split at ${at}`,
            );
          }
        }
      }
    }
  });

  it('redacts base64 wrapped as the base64 command, openssl and MIME print it', () => {
    const random = prng(35);
    // 80 bytes (the review's case), with bytes that put '+' and '/' into the standard alphabet.
    const secret = Buffer.from(
      Array.from({ length: 80 }, (_, k) => (k % 7 === 0 ? 0xfb + random(4) : 0x21 + random(94))),
    );
    const registry = registryOf(secret.toString('latin1'));
    const value = Buffer.from(secret.toString('latin1'), 'utf8'); // what was registered, as bytes
    for (const before of [0, 1, 2, 37, 57]) {
      for (const after of [0, 2, 90]) {
        const blob = Buffer.concat([
          Buffer.from(Array.from({ length: before }, () => random(256))),
          value,
          Buffer.from(Array.from({ length: after }, () => random(256))),
        ]);
        for (const { name, wrap } of WRAPPERS) {
          const wrapped = wrap(blob);
          assert.ok(/\n[A-Za-z0-9+/_-]/.test(wrapped), `${name} wraps`);
          const input = Buffer.from(`$ cat key.b64\n${wrapped}$ echo done\ndone\n`);
          const whole = pass(registry.stream(), [input]).all.toString();
          const label = `${name}, ${before}/${after}`;
          assert.ok(whole.includes(REDACTION_MARKER), `${label}: ${whole}`);
          assertNoPieceOfWrapped(whole, value, label);
          assert.ok(whole.startsWith('$ cat key.b64\n') && whole.endsWith('$ echo done\ndone\n'), label);
          for (let at = 0; at <= input.length; at += 1 + random(6)) {
            assert.equal(
              pass(registry.stream(), splitAt(input, [at])).all.toString(),
              whole,
              `${label}, split at ${at}`,
            );
          }
          const cuts = Array.from({ length: 6 }, () => random(input.length + 1)).sort((a, b) => a - b);
          assert.equal(
            pass(registry.stream(), splitAt(input, cuts)).all.toString(),
            whole,
            `${label}, ${cuts}`,
          );
        }
      }
    }
  });

  it('computes the base64 characters that depend on the value alone', () => {
    const value = Buffer.from('abcdefgh');
    for (const alignment of [0, 1, 2] as const) {
      const inner = stableBase64(value, alignment);
      for (const fill of [0x00, 0xff, 0x5a]) {
        const blob = Buffer.concat([Buffer.alloc(alignment, fill), value, Buffer.alloc(3, fill)]);
        assert.ok(blob.toString('base64').includes(inner), `alignment ${alignment}, fill ${fill}`);
      }
    }
  });

  it('redacts JSON-escaped and URL-encoded forms, and each line of a multi-line secret', () => {
    const secret = 'p@ss"word/with\\slash&x=1 ü';
    const pem =
      '-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END KEY-----\n';
    const registry = registryOf(secret, pem);
    const input = [
      `{"password":${JSON.stringify(secret)}}`,
      `GET /login?pw=${encodeURIComponent(secret)}&next=1`,
      'line: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC',
      JSON.stringify({ key: pem }),
    ].join('\n');
    const output = registry.redact(input).toString();
    assert.equal(
      output,
      [
        `{"password":"${REDACTION_MARKER}"}`,
        `GET /login?pw=${REDACTION_MARKER}&next=1`,
        `line: ${REDACTION_MARKER}`,
        `{"key":"${REDACTION_MARKER}\\n"}`, // the value is trimmed: its final newline stays
      ].join('\n'),
    );
  });

  it('redacts the JSON, URL and HTML forms other encoders write (Go, PHP, Python, .NET, forms, entities)', () => {
    const secrets = ['p@ss"w<o>r&d/é 🔑\'x=+ 1', 'sk-Live_a/b+c=d&e<f>g\'h"i', 'plain-token_0123.abc'];
    const registry = registryOf(...secrets);
    for (const secret of secrets) {
      for (const { name, encode, decode } of ENCODERS) {
        const encoded = encode(secret);
        assert.equal(decode(encoded), secret, `${name} round-trips`);
        const input = Buffer.from(`before ${encoded} after\n`);
        const whole = pass(registry.stream(), [input]).all.toString();
        assert.equal(whole, `before ${REDACTION_MARKER} after\n`, `${name}: ${encoded}`);
        for (let at = 0; at <= input.length; at += 3) {
          assert.equal(
            pass(registry.stream(), splitAt(input, [at])).all.toString(),
            whole,
            `${name} split at ${at}`,
          );
        }
      }
    }
  });

  it('redacts a secret JSON-escaped twice (a JSON file shown inside a JSON line)', () => {
    const secret = 'p@ss"word/with\\slash';
    const registry = registryOf(secret);
    const file = JSON.stringify({ password: secret });
    const line = JSON.stringify({ type: 'user', content: [{ type: 'tool_result', content: file }] });
    const output = registry.redact(line).toString();
    assert.ok(output.includes(REDACTION_MARKER));
    assert.ok(!output.includes(JSON.stringify(JSON.stringify(secret).slice(1, -1)).slice(1, -1)));
    assert.equal(JSON.parse(JSON.parse(output).content[0].content).password, REDACTION_MARKER);
  });

  it('merges overlapping and nested secrets into one marker', () => {
    const registry = registryOf('abcdef12', 'ef12ghij', 'cdef');
    const cases: [string, string][] = [
      ['<abcdef12ghij>', `<${REDACTION_MARKER}>`],
      ['<abcdef12>', `<${REDACTION_MARKER}>`],
      ['<xcdefx>', `<x${REDACTION_MARKER}x>`],
      ['<abcdef12abcdef12>', `<${REDACTION_MARKER}${REDACTION_MARKER}>`],
    ];
    for (const [input, expected] of cases) {
      const data = Buffer.from(input);
      for (let at = 0; at <= data.length; at++) {
        assert.equal(
          pass(registry.stream(), splitAt(data, [at])).all.toString(),
          expected,
          `${input} @${at}`,
        );
      }
    }
  });

  it('replaces an endless run of a periodic secret by one marker, holding back little', () => {
    const registry = registryOf('aaaa');
    const stream = registry.stream();
    const chunk = Buffer.alloc(4096, 'a');
    const pieces: Buffer[] = [];
    for (let k = 0; k < 256; k++) {
      const out = stream.write(chunk);
      pieces.push(out);
      assert.ok(out.length <= REDACTION_MARKER.length);
    }
    pieces.push(stream.write(Buffer.from('!')), stream.flush());
    assert.equal(Buffer.concat(pieces).toString(), `${REDACTION_MARKER}!`);
  });

  it('keeps multi-byte UTF-8 characters whole around and inside secrets', () => {
    const secret = 'pässwörd-€-🔑';
    const registry = registryOf(secret);
    const input = Buffer.from(`→ 日本語 ${secret}✓🔑 é ${secret}🔑`);
    const expected = `→ 日本語 ${REDACTION_MARKER}✓🔑 é ${REDACTION_MARKER}🔑`;
    for (let i = 0; i <= input.length; i++) {
      for (const j of [i, Math.min(input.length, i + 1), Math.min(input.length, i + 2), input.length]) {
        const { pieces, all } = pass(registry.stream(), splitAt(input, [i, j]));
        for (const piece of pieces) assert.doesNotThrow(() => utf8.decode(piece), `split at ${i},${j}`);
        assert.equal(all.toString(), expected, `split at ${i},${j}`);
      }
    }
    // No secret at all: every piece still decodes, and the bytes are unchanged.
    const plain = Buffer.from('ünïcödé 🔑🔑 日本語 '.repeat(3));
    for (let at = 0; at <= plain.length; at++) {
      const { pieces, all } = pass(registry.stream(), splitAt(plain, [at]));
      for (const piece of pieces) assert.doesNotThrow(() => utf8.decode(piece), `plain split at ${at}`);
      assert.ok(all.equals(plain));
    }
  });

  it('holds back at most the longest form minus one byte', () => {
    const values = ['0123456789abcdefXYZ', 'wxyz0123'];
    const registry = registryOf(...values);
    const longest = Math.max(...values.flatMap((v) => secretForms(v)).map((f) => f.length));
    const random = prng(5);
    // Text without occurrences but full of prefixes of the forms.
    const alphabet = '0123456789abcdefwxyz .';
    const input = Buffer.from(
      Array.from({ length: 20_000 }, () => alphabet[random(alphabet.length)]).join(''),
    );
    assert.ok(reference(values, input).equals(input), 'the text holds no occurrence');
    const stream = registry.stream();
    let written = 0;
    let out = 0;
    while (written < input.length) {
      const size = random(40);
      out += stream.write(input.subarray(written, written + size)).length;
      written = Math.min(input.length, written + size);
      assert.ok(written - out <= longest - 1, `held ${written - out} > ${longest - 1}`);
    }
    assert.equal(out + stream.flush().length, input.length);
  });

  it('applies a value registered mid-stream to every byte not yet emitted', () => {
    const registry = registryOf('abcdWXYZ');
    const stream = registry.stream();
    const first = stream.write(Buffer.from('visible abcd')); // "abcd" may begin abcdWXYZ: held
    assert.equal(first.toString(), 'visible ');
    assert.ok(registry.register('abcdefgh'));
    const rest = pass(stream, [Buffer.from('efgh then abcdefgh')]).all;
    assert.equal(`${first}${rest}`, `visible ${REDACTION_MARKER} then ${REDACTION_MARKER}`);
    // What already left cannot be recalled; what follows is redacted.
    const late = registry.stream();
    const head = late.write(Buffer.from('token: 9f8e7d6c5b'));
    registry.register('9f8e7d6c5b4a');
    const tail = pass(late, [Buffer.from('4a and 9f8e7d6c5b4a')]).all;
    assert.equal(`${head}${tail}`, `token: 9f8e7d6c5b4a and ${REDACTION_MARKER}`);
  });

  it('redacts the rest of a secret that straddles an explicit flush', () => {
    const registry = registryOf('turn-secret-0042');
    const stream = registry.stream();
    const head = Buffer.concat([stream.write(Buffer.from('x turn-sec')), stream.flush()]);
    assert.equal(head.toString(), 'x turn-sec');
    const tail = pass(stream, [Buffer.from('ret-0042 y')]).all;
    assert.equal(tail.toString(), `${REDACTION_MARKER} y`);
  });

  it('does not register values too short or blank to redact', () => {
    const registry = createSecretRegistry();
    for (const value of ['', 'a', 'abc', '   ', '\n\t \n', ' ab ', 'é']) {
      assert.equal(registry.register(value), false, JSON.stringify(value));
    }
    assert.equal(registry.size, 0);
    assert.equal(MIN_SECRET_BYTES, 4);
    assert.equal(registry.register(' abcd\n'), true);
    assert.equal(registry.register('abcd'), true, 'the same value once more');
    assert.equal(registry.size, 1);
    assert.equal(registry.redact('a abc abcd').toString(), `a abc ${REDACTION_MARKER}`);
    assert.equal(registry.registerAll(['1', 'longer-value', 'xy']), 1);
  });

  it('redacts stdout and stderr independently, each across its own writes', () => {
    const registry = registryOf('AKIAIOSFODNN7EXAMPLE');
    const stdout = registry.stream();
    const stderr = registry.stream();
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    out.push(stdout.write(Buffer.from('key AKIAIOSF')));
    err.push(stderr.write(Buffer.from('warn AKIA')));
    out.push(stdout.write(Buffer.from('ODNN7EXAMPLE done')));
    err.push(stderr.write(Buffer.from('IOSFODNN7EXAMPLE!')));
    out.push(stdout.flush());
    err.push(stderr.flush());
    assert.equal(Buffer.concat(out).toString(), `key ${REDACTION_MARKER} done`);
    assert.equal(Buffer.concat(err).toString(), `warn ${REDACTION_MARKER}!`);
  });

  it('the property: random chunking of random text never lets a secret or its base64 through', () => {
    const random = prng(20261124);
    const SECRET_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
    // Noise can contain no form of such secrets: no letter, digit or base64 character.
    const NOISE = [...' .,;:!?()[]{}<>*&^%$#@~|\n\t"\'', 'é', '日', '🔑', '€'];
    // Characters the encoders escape; a secret starts and ends with a letter or digit, so every
    // form of it holds one (the noise holds none) and trimming leaves it whole.
    const SPECIAL = [...'!@#$%&*+/=?"\'<> ~', 'é', '🔑'];
    const pick = (chars: string | string[]) => chars[random(chars.length)]!;
    for (let round = 0; round < 400; round++) {
      const specials = random(2) === 0;
      const secrets = Array.from({ length: 1 + random(6) }, () => {
        const middle = Array.from({ length: MIN_SECRET_BYTES - 2 + random(24) }, () =>
          specials && random(4) === 0 ? pick(SPECIAL) : pick(SECRET_CHARS),
        );
        return `${pick(SECRET_CHARS)}${middle.join('')}${pick(SECRET_CHARS)}`;
      });
      const registry = registryOf(...secrets);
      const parts: Buffer[] = [];
      const plainParts: Buffer[] = [];
      for (let k = random(12); k > 0; k--) {
        const noise = Buffer.from(Array.from({ length: random(40) }, () => pick(NOISE)).join(''));
        parts.push(noise);
        plainParts.push(noise);
        const value = secrets[random(secrets.length)]!;
        const secret = Buffer.from(value);
        switch (random(5)) {
          case 0:
            parts.push(secret);
            break;
          case 1: {
            const blob = Buffer.concat([
              Buffer.alloc(random(5), random(256)),
              secret,
              Buffer.alloc(random(5), 7),
            ]);
            parts.push(Buffer.from(blob.toString(random(2) === 0 ? 'base64' : 'base64url')));
            break;
          }
          case 2: {
            // Wrapped at a width the common tools use (or any ≥ JOIN_RUN), LF or CRLF.
            const blob = Buffer.concat([
              Buffer.alloc(random(60), random(256)),
              secret,
              Buffer.alloc(random(60), 7),
            ]);
            const width = [16, 60, 64, 70, 76][random(5)]!;
            const encoded = blob.toString(random(2) === 0 ? 'base64' : 'base64url');
            const lines = encoded.match(new RegExp(`.{1,${width}}`, 'g')) ?? [];
            parts.push(Buffer.from(`${lines.join(random(2) === 0 ? '\n' : '\r\n')}\n`));
            break;
          }
          case 3:
            parts.push(Buffer.from(ENCODERS[random(ENCODERS.length)]!.encode(value)));
            break;
          default:
            parts.push(Buffer.from([...value].slice(0, random([...value].length)).join(''))); // a prefix: must pass unchanged
        }
      }
      const input = Buffer.concat(parts);
      const plain = Buffer.concat(plainParts);
      const cuts = (data: Buffer) =>
        Array.from({ length: random(8) }, () => random(data.length + 1)).sort((a, b) => a - b);
      const { pieces, all } = pass(registry.stream(), splitAt(input, cuts(input)));
      assert.ok(all.equals(reference(secrets, input)), `round ${round}`);
      const text = all.toString();
      for (const secret of secrets) {
        assert.ok(!text.includes(secret), `round ${round}: ${secret} leaked`);
        assertNoBase64Of(text, secret, `round ${round}`);
        assertNoBase64Of(text.replace(/\r?\n/g, ''), secret, `round ${round}, lines joined`);
        for (const { name, encode } of ENCODERS) {
          assert.ok(!text.includes(encode(secret)), `round ${round}: ${secret} leaked as ${name}`);
        }
      }
      for (const piece of pieces) assert.doesNotThrow(() => utf8.decode(piece), `round ${round}`);
      const untouched = pass(registry.stream(), splitAt(plain, cuts(plain))).all;
      assert.ok(untouched.equals(plain), `round ${round}: text without secrets changed`);
    }
  });

  it('writeParts() hands out what write() would, as views of the chunk, each part whole UTF-8', () => {
    const secret = 'pässwörd-€-🔑-0123456789';
    const registry = registryOf(secret);
    const input = Buffer.from(`→ 日本語 ${secret}✓🔑 é ${'ünïcödé 🔑 '.repeat(40)}${secret}🔑 tail`);
    for (let i = 1; i < input.length; i += 3) {
      for (const j of [i + 1, i + 5, i + 97]) {
        const chunks = splitAt(input, [i, Math.min(j, input.length)]);
        const whole = registry.stream();
        const parted = registry.stream();
        for (const chunk of chunks) {
          const parts = parted.writeParts(chunk);
          assert.ok(Buffer.concat(parts).equals(whole.write(chunk)), `split at ${i},${j}`);
          for (const part of parts) assert.doesNotThrow(() => utf8.decode(part), `split at ${i},${j}`);
        }
        assert.ok(parted.flush().equals(whole.flush()));
      }
    }
    // Output without a secret is not copied: the chunk's bytes go out as a view of the chunk.
    const stream = registry.stream();
    stream.write(Buffer.from('first line\n'));
    const chunk = Buffer.from('x'.repeat(16 * 1024));
    const parts = stream.writeParts(chunk);
    const largest = parts.reduce((a, b) => (b.length > a.length ? b : a));
    assert.ok(largest.length > 16 * 1024 - 64 && largest.buffer === chunk.buffer);
  });

  it('passes invalid UTF-8 and binary output through unchanged except for secrets', () => {
    const random = prng(99);
    for (let round = 0; round < 200; round++) {
      const secrets = ['\u00ff\u0080secret', 'bin4ry-t0ken'];
      const registry = registryOf(...secrets);
      const input = Buffer.concat(
        Array.from({ length: 6 }, () =>
          random(4) === 0
            ? Buffer.from(secrets[random(2)]!)
            : Buffer.from(Array.from({ length: random(30) }, () => random(256))),
        ),
      );
      const cuts = Array.from({ length: random(6) }, () => random(input.length + 1)).sort((a, b) => a - b);
      assert.ok(
        pass(registry.stream(), splitAt(input, cuts)).all.equals(reference(secrets, input)),
        `${round}`,
      );
    }
  });
  it('counts as emitted exactly the raw bytes its output represents, never the held-back ones', () => {
    const secret = 'tok-8c1f2a9d3e';
    const registry = registryOf(secret);
    const redactor = registry.stream();
    // No occurrence anywhere near: every byte written is decided at once.
    assert.equal(redactor.write(Buffer.from('plain line\n')).length, 11);
    assert.equal(redactor.emitted, 11);
    // The head of the secret may still begin an occurrence: held back, not counted.
    const head = redactor.write(Buffer.from(`x ${secret.slice(0, 6)}`));
    assert.equal(head.toString(), 'x ');
    assert.equal(redactor.emitted, 13);
    // The rest completes it: the marker represents all of the secret's raw bytes.
    const rest = Buffer.concat([redactor.write(Buffer.from(`${secret.slice(6)} y`)), redactor.flush()]);
    assert.equal(rest.toString(), `${REDACTION_MARKER} y`);
    assert.equal(redactor.emitted, 11 + 2 + secret.length + 2);
    // A character cut by the chunk boundary is held back whole.
    const cut = Buffer.from('é');
    assert.equal(redactor.write(cut.subarray(0, 1)).length, 0);
    assert.equal(redactor.emitted, 11 + 2 + secret.length + 2);
    assert.equal(redactor.write(cut.subarray(1)).toString(), 'é');
    assert.equal(redactor.emitted, 11 + 2 + secret.length + 4);
  });
});

describe('the registry counts its redactions', () => {
  it('one per marker emitted, by its streams and by redact(), a secret split across chunks once', () => {
    const secret = 'count-me-secret-0123';
    const registry = registryOf(secret);
    assert.equal(registry.redactions, 0);
    const stream = registry.stream();
    const text = Buffer.from(`a ${secret} b ${secret}`);
    const all = pass(stream, [text.subarray(0, 7), text.subarray(7, 20), text.subarray(20)]).all;
    assert.equal(all.toString(), `a ${REDACTION_MARKER} b ${REDACTION_MARKER}`);
    assert.equal(registry.redactions, 2);
    assert.equal(registry.redact(`x ${secret}`).toString(), `x ${REDACTION_MARKER}`);
    assert.equal(registry.redact('nothing here').toString(), 'nothing here');
    assert.equal(registry.redactions, 3);
  });
});
