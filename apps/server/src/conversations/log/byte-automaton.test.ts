// The Aho-Corasick scanner against a naive search, on random patterns over small alphabets
// (many shared prefixes and suffixes, so failure links and nested outputs are exercised), with
// the dense rows at their default budget and with none beyond depth 1 (the sparse states).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildByteAutomaton, JOIN_RUN, joinContext, joinedText } from './byte-automaton.ts';

/** mulberry32: a small seeded PRNG, so failures reproduce. */
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

const bytesOf = (random: (n: number) => number, alphabet: number[], length: number): Buffer =>
  Buffer.from(Array.from({ length }, () => alphabet[random(alphabet.length)]!));

/** For each end offset with an occurrence: the longest pattern ending there. */
function naive(patterns: Buffer[], text: Buffer): number[] {
  const longestAt = new Map<number, number>();
  for (const p of patterns) {
    for (let at = text.indexOf(p); at !== -1; at = text.indexOf(p, at + 1)) {
      const end = at + p.length;
      longestAt.set(end, Math.max(longestAt.get(end) ?? 0, p.length));
    }
  }
  return [...longestAt.entries()].sort((a, b) => a[0] - b[0]).flat();
}

describe('byte automaton', () => {
  for (const denseEntries of [undefined, 0]) {
    it(`finds the longest pattern ending at every offset, like a naive search (dense budget ${denseEntries ?? 'default'})`, () => {
      const random = prng(denseEntries === 0 ? 7 : 11);
      for (let round = 0; round < 200; round++) {
        const alphabet = Array.from(
          { length: 2 + random(4) },
          (_, i) => [0x61, 0x62, 0x00, 0xff, 0xe2, 0x80][i]!,
        );
        const patterns = Array.from({ length: 1 + random(12) }, () =>
          bytesOf(random, alphabet, 1 + random(7)),
        );
        const text = bytesOf(random, alphabet, random(300));
        const automaton = buildByteAutomaton(patterns, { denseEntries });
        const found: number[] = [];
        automaton.scan(text, 0, text.length, automaton.start, 0, found);
        assert.deepEqual(found, naive(patterns, text), `round ${round}`);

        // Chunked, with the state carried over: the same occurrences, and after each byte no
        // occurrence still to complete starts before (offset − lookback).
        const chunked: number[] = [];
        let state = automaton.start;
        for (let at = 0; at < text.length; at++) {
          state = automaton.scan(text, at, at + 1, state, 0, chunked);
          const lookback = automaton.lookback(state);
          assert.ok(lookback < automaton.longest || automaton.longest === 0);
          for (const p of patterns) {
            for (let start = Math.max(0, at + 1 - p.length + 1); start < at + 1 - lookback; start++) {
              const head = text.subarray(start, at + 1);
              assert.ok(
                !(head.length < p.length && p.subarray(0, head.length).equals(head)),
                `round ${round}: an occurrence may start at ${start}, before the lookback`,
              );
            }
          }
        }
        assert.deepEqual(chunked, found, `round ${round} chunked`);
      }
    });
  }

  it('skips ahead over long patterns and still finds what a naive search does, in chunks of any size', () => {
    // Patterns of 8 bytes or more turn on the skip table (Wu-Manber blocks of 3 bytes): small
    // alphabets make most windows candidates, larger ones let the scan jump.
    const random = prng(23);
    for (let round = 0; round < 300; round++) {
      const size = [2, 3, 4, 8, 26, 200][round % 6]!;
      const alphabet = Array.from({ length: size }, (_, i) => (0x41 + i * 7) & 0xff);
      const patterns = Array.from({ length: 1 + random(20) }, () =>
        bytesOf(random, alphabet, 8 + random(16)),
      );
      // Some text with the patterns planted in it, some without.
      const parts: Buffer[] = [];
      for (let k = random(40); k > 0; k--) {
        parts.push(bytesOf(random, alphabet, random(120)));
        if (random(2) === 0) {
          const p = patterns[random(patterns.length)]!;
          parts.push(random(4) === 0 ? p.subarray(0, random(p.length)) : p);
        }
      }
      const text = Buffer.concat(parts);
      const expected = naive(patterns, text);
      for (const denseEntries of [undefined, 0]) {
        const automaton = buildByteAutomaton(patterns, { denseEntries });
        const whole: number[] = [];
        automaton.scan(text, 0, text.length, automaton.start, 0, whole);
        assert.deepEqual(whole, expected, `round ${round} whole`);

        // Random chunks, each scanned from 0 in a buffer of its own (as the redactor does), the
        // state carried over; after each chunk every occurrence that ends later starts at or
        // after (position − lookback).
        const chunked: number[] = [];
        let state = automaton.start;
        for (let at = 0; at < text.length; ) {
          const end = Math.min(text.length, at + 1 + random(64));
          state = automaton.scan(Buffer.from(text.subarray(at, end)), 0, end - at, state, at, chunked);
          const lookback = automaton.lookback(state);
          for (let k = 0; k < expected.length; k += 2) {
            const occurrenceEnd = expected[k]!;
            if (occurrenceEnd > end)
              assert.ok(
                occurrenceEnd - expected[k + 1]! >= end - lookback,
                `round ${round}: an occurrence ending at ${occurrenceEnd} starts before the lookback at ${end}`,
              );
          }
          at = end;
        }
        assert.deepEqual(chunked, expected, `round ${round} chunked`);
      }
    }
  });

  it('joins line breaks after a base64 run (wrapped base64) like a naive search of the joined text', () => {
    const random = prng(35);
    const B64 = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_'].map((c) =>
      c.charCodeAt(0),
    );
    const small = B64.slice(0, 4);
    for (let round = 0; round < 300; round++) {
      const alphabet = round % 2 === 0 ? B64 : small;
      const patterns = Array.from({ length: 1 + random(10) }, () =>
        bytesOf(random, alphabet, (round % 3 === 0 ? 4 : 8) + random(40)),
      );
      // Base64-like text with the patterns planted, wrapped at a random width (LF or CRLF), and
      // short lines and blank ones (breaks that are not joined).
      const parts: Buffer[] = [];
      for (let k = random(20); k > 0; k--) {
        parts.push(bytesOf(random, alphabet, random(90)));
        if (random(2) === 0) parts.push(patterns[random(patterns.length)]!);
      }
      const flat = Buffer.concat(parts).toString('latin1');
      const width = JOIN_RUN - 2 + random(70);
      const eol = ['\n', '\r\n', '\n\n', '\r'][random(4)]!;
      const text = Buffer.from(flat.match(new RegExp(`.{1,${width}}`, 'gs'))?.join(eol) ?? '', 'latin1');
      const { text: view, offsets } = joinedText(text);
      const expected = naive(patterns, view);
      for (let k = 0; k < expected.length; k += 2) expected[k] = offsets[expected[k]! - 1]! + 1;
      const occurrences = (found: number[]) =>
        found.filter((_, k) => (k % 2 === 1 ? found[k]! > 0 : found[k + 1]! > 0));
      for (const denseEntries of [undefined, 0]) {
        const automaton = buildByteAutomaton(patterns, { denseEntries });
        const whole: number[] = [];
        automaton.scan(text, 0, text.length, automaton.start, 0, whole);
        assert.deepEqual(occurrences(whole), expected, `round ${round} whole`);
        // In chunks of their own buffers, the join context carried over.
        const chunked: number[] = [];
        let state = automaton.start;
        let context = 0;
        for (let at = 0; at < text.length; ) {
          const end = Math.min(text.length, at + 1 + random(40));
          const chunk = Buffer.from(text.subarray(at, end));
          state = automaton.scan(chunk, 0, chunk.length, state, at, chunked, context);
          context = joinContext((k) => chunk[k]!, chunk.length, context);
          at = end;
        }
        assert.deepEqual(occurrences(chunked), expected, `round ${round} chunked`);
        // The joins reported are breaks the naive view dropped, and they include every one inside
        // an occurrence (what maps it back to the bytes it covers). Where the scan reports joins
        // outside occurrences depends on where it jumped.
        const kept = new Set(offsets);
        for (const found of [whole, chunked]) {
          const joins = new Set<number>();
          for (let k = 0; k < found.length; k += 2) if (found[k + 1] === 0) joins.add(found[k]! - 1);
          for (const at of joins)
            assert.ok(at < text.length && !kept.has(at), `round ${round}: ${at} is not joined`);
          for (let k = 0; k < found.length; k += 2) {
            if (found[k + 1] === 0) continue;
            const end = found[k]!;
            let start = end;
            for (let left = found[k + 1]!; left > 0; start--) if (kept.has(start - 1)) left--;
            for (let at = start; at < end; at++) {
              if (!kept.has(at))
                assert.ok(joins.has(at), `round ${round}: the join at ${at} inside ${start}…${end}`);
            }
          }
        }
      }
    }
  });

  it('reports stream offsets from the given base and nothing without patterns', () => {
    const automaton = buildByteAutomaton([Buffer.from('needle')]);
    const found: number[] = [];
    automaton.scan(Buffer.from('xxneedlexx'), 0, 10, automaton.start, 1000, found);
    assert.deepEqual(found, [1008, 6]);
    const none = buildByteAutomaton([]);
    const nothing: number[] = [];
    assert.equal(none.scan(Buffer.from('anything'), 0, 8, none.start, 0, nothing), none.start);
    assert.deepEqual(nothing, []);
    assert.equal(none.longest, 0);
  });
});
