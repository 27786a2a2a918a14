// Redaction of sandbox output: a registry of secret values per conversation, and a streaming
// redactor per output stream (stdout and stderr each their own) that the log writer passes
// every byte through before anything is persisted, broadcast or logged.
//
// What must hold (tests in redactor.test.ts unless named otherwise):
// 1. No registered form of a registered value is emitted, whole or split across writes at any
//    offset, into any number of chunks: every occurrence is replaced by REDACTION_MARKER.
//    Forms: secret-forms.ts (the value, its lines, base64 at 3 alignments × 2 alphabets, the
//    JSON, URL and HTML escapes of the common encoders), matched across the line breaks of
//    wrapped base64 (byte-automaton.ts joins them; the marker then covers the breaks inside an
//    occurrence). Tests: "a secret split across two writes at every offset", "redacts base64
//    wrapped as the base64 command, openssl and MIME print it", "the property: random chunking
//    of random text never lets a secret or its base64 through".
// 2. Overlapping or nested occurrences merge into ONE marker covering their union: no byte of
//    any occurrence survives, and a run like "aaaaaaaa" for the value "aaaa" is one marker, held
//    in constant memory. Tests: "merges overlapping and nested secrets into one marker",
//    "replaces an endless run of a periodic secret by one marker, holding back little".
// 3. Everything else passes byte for byte: output without occurrences equals the input, and
//    the concatenated output is the input with each occurrence region replaced. Test: the
//    property test, also on invalid UTF-8.
// 4. Bounded hold-back: after a write, the bytes not yet emitted are at most max(longest form
//    − 1, 3), plus the joined line breaks among them: those that may still begin an occurrence
//    (the automaton's lookback, in joined text) and, when the input is valid UTF-8, the head of
//    a character cut by the chunk boundary. Every emitted chunk of valid UTF-8 input is itself
//    valid UTF-8 (never a split character). flush() emits the rest. Tests: "holds back at most the longest form minus one byte", "keeps multi-byte
//    UTF-8 characters whole around and inside secrets".
// 5. A value registered mid-stream applies to every occurrence that begins in a byte not yet
//    emitted (the held-back bytes are rescanned with the new automaton); one that began in
//    bytes already out is not recalled. Test: "applies a value registered mid-stream to every
//    byte not yet emitted".
// 6. Output that already left is never recalled: an occurrence that straddles an explicit
//    flush() is redacted from the flush on (its head went out before it). Flush only where
//    output must be complete (end of a turn, end of the stream). Test: "redacts the rest of a
//    secret that straddles an explicit flush".
// Values are kept in memory only (spec: the redaction registry is not durable), never logged.
import { type ByteAutomaton, buildByteAutomaton, joinContext } from './byte-automaton.ts';
import { MIN_SECRET_BYTES, secretForms } from './secret-forms.ts';

export { MIN_SECRET_BYTES };

/** What replaces each redacted region. */
export const REDACTION_MARKER = '[REDACTED]';
const MARKER = Buffer.from(REDACTION_MARKER);
/** The bytes as a Buffer, without a copy. */
const view = (bytes: Uint8Array): Buffer =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

export interface SecretRegistry {
  /**
   * Registers a secret value (all its forms) for every redactor of this registry. Returns false,
   * and registers nothing, when the value is too short to redact (trimmed < MIN_SECRET_BYTES
   * bytes, or whitespace only): see secret-forms.ts.
   */
  register(value: string): boolean;
  /** register() for each value, rebuilding the matcher once; returns how many were accepted. */
  registerAll(values: Iterable<string>): number;
  /** How many distinct values are registered. */
  readonly size: number;
  /** The matcher for the current set of values (rebuilt lazily after a registration). */
  matcher(): ByteAutomaton;
  /** A new streaming redactor over this registry, one per output stream. */
  stream(): StreamRedactor;
  /** Redacts a complete piece of output at once (a stage message, an error text). */
  redact(data: string | Uint8Array): Buffer;
  /** Markers emitted so far by every redactor of this registry, redact() included (a metric). */
  readonly redactions: number;
}

export interface StreamRedactor {
  /**
   * Feeds the next chunk; returns the redacted bytes that are decided (possibly empty). The
   * result may be a view of `chunk` (no copy when nothing is held back or replaced): do not
   * modify a chunk after writing it.
   */
  write(chunk: Uint8Array): Buffer;
  /**
   * write() as the pieces it joins, in order, never copied: views of `chunk`, of bytes held
   * back from earlier chunks and of the marker (do not modify them). Each piece is valid UTF-8
   * when the input is (invariant 4), so a piece can be stored on its own.
   */
  writeParts(chunk: Uint8Array): readonly Buffer[];
  /** Emits everything held back (end of a turn, end of the stream). */
  flush(): Buffer;
  /**
   * Raw input bytes decided so far: emitted as they are or replaced by a marker already
   * emitted. The held-back bytes are not counted, so the bytes returned by write/flush always
   * represent exactly `emitted` raw bytes (reattach de-duplication counts on it).
   */
  readonly emitted: number;
}

/**
 * Every registry created since trackEveryRegistry() (held weakly: a conversation's registry goes
 * with its server). Null until then, so the process pays nothing when nothing reads them.
 */
let tracked: Set<WeakRef<SecretRegistry>> | null = null;

/**
 * From now on, keeps (weakly) every registry created, and returns the function that redacts a
 * text with all of them: the error reports scrub each event with it (observability/error-reports.ts),
 * so no value registered for any conversation's log reaches a report either.
 */
export function trackEveryRegistry(): (text: string) => string {
  tracked ??= new Set();
  const live = tracked;
  return (text) => {
    let out = text;
    for (const ref of live) {
      const registry = ref.deref();
      if (!registry) {
        live.delete(ref);
        continue;
      }
      if (registry.size > 0) out = registry.redact(out).toString('utf8');
    }
    return out;
  };
}

export function createSecretRegistry(): SecretRegistry {
  const values = new Set<string>();
  const patterns: Buffer[] = [];
  let built: ByteAutomaton | undefined;
  let redactions = 0;
  const onMarker = (): void => {
    redactions++;
  };

  const add = (value: string): boolean => {
    const key = value.trim();
    if (values.has(key)) return true;
    const forms = secretForms(value);
    if (forms.length === 0) return false;
    values.add(key);
    patterns.push(...forms);
    built = undefined;
    return true;
  };

  const registry: SecretRegistry = {
    register: add,
    registerAll(list) {
      let accepted = 0;
      for (const value of list) if (add(value)) accepted++;
      return accepted;
    },
    get size() {
      return values.size;
    },
    matcher() {
      built ??= buildByteAutomaton(patterns);
      return built;
    },
    get redactions() {
      return redactions;
    },
    stream: () => createStreamRedactor(registry, onMarker),
    redact(data) {
      const redactor = createStreamRedactor(registry, onMarker);
      const head = redactor.write(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
      return Buffer.concat([head, redactor.flush()]);
    },
  };
  tracked?.add(new WeakRef(registry));
  return registry;
}

/**
 * The byte offset ≤ limit (and ≥ floor) where output may stop without cutting a UTF-8
 * character: before a lead byte whose sequence does not fit. Invalid sequences pass as they are.
 */
function characterBoundary(byteAt: (offset: number) => number, floor: number, limit: number): number {
  for (let at = limit - 1; at >= floor && at >= limit - 3; at--) {
    const b = byteAt(at);
    if ((b & 0xc0) === 0x80) continue; // continuation byte: look further back
    const size = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return at + size > limit ? at : limit;
  }
  return limit;
}

/** `onMarker`: called once per marker emitted (the registry's count of redactions). */
export function createStreamRedactor(
  registry: Pick<SecretRegistry, 'matcher'>,
  onMarker?: () => void,
): StreamRedactor {
  let automaton = registry.matcher();
  let state = automaton.start;
  /** Stream offset of the next input byte. */
  let position = 0;
  /** Every input byte before this offset has been emitted or replaced by a marker. */
  let emitted = 0;
  /** End of the last marker emitted while nothing was emitted after it, else -1. */
  let markerEnd = -1;
  /** Raw input bytes [heldStart, position): everything not emitted, plus the lookback. */
  let held: Buffer = Buffer.alloc(0);
  let heldStart = 0;
  /** Occurrences not yet resolved: sorted disjoint [start, end) pairs, starts ≥ emitted. */
  let pending: number[] = [];
  const found: number[] = [];
  /** The automaton's join context at `position`, and at `heldStart` (for a rescan). */
  let context = 0;
  let heldContext = 0;
  /** Stream offsets of the line breaks the scan joined, ascending, those ≥ heldStart. */
  let breaks: number[] = [];

  /** The stream offset `count` bytes of joined text before `end`: the joined breaks count extra. */
  const back = (end: number, count: number): number => {
    let start = end - count;
    for (let k = breaks.length - 1; k >= 0 && breaks[k]! >= start; k--) if (breaks[k]! < end) start--;
    return start;
  };

  /** Records the occurrence [start, end) (invariant 2: unions, never a second marker inside). */
  const occurrence = (start: number, end: number): void => {
    if (start < emitted) {
      if (markerEnd === emitted) {
        // Overlaps the marker just emitted: it now covers this occurrence too.
        if (end > markerEnd) {
          markerEnd = end;
          while (pending.length > 0 && pending[0]! < markerEnd) {
            markerEnd = Math.max(markerEnd, pending[1]!);
            pending.splice(0, 2);
          }
          emitted = markerEnd;
        }
        return;
      }
      start = emitted; // its head already left (invariant 6)
    }
    if (start >= end) return;
    // Occurrences arrive in order of their end: nearly always after, or overlapping, the last.
    const last = pending.length - 2;
    if (last < 0 || start >= pending[last + 1]!) {
      pending.push(start, end);
      return;
    }
    if (start >= pending[last]!) {
      pending[last + 1] = Math.max(pending[last + 1]!, end);
      return;
    }
    const merged: number[] = [];
    let placed = false;
    for (let k = 0; k < pending.length; k += 2) {
      const s = pending[k]!;
      const e = pending[k + 1]!;
      if (e <= start || s >= end) {
        if (!placed && s >= end) {
          merged.push(start, end);
          placed = true;
        }
        merged.push(s, e);
      } else {
        start = Math.min(start, s);
        end = Math.max(end, e);
      }
    }
    if (!placed) merged.push(start, end);
    pending = merged;
  };

  const recordFound = (): void => {
    for (let k = 0; k < found.length; k += 2) {
      const end = found[k]!;
      const length = found[k + 1]!;
      if (length === 0) breaks.push(end - 1);
      else occurrence(back(end, length), end);
    }
    found.length = 0;
  };

  /**
   * Emits what is decided (everything when `final`) from held ++ chunk, then re-holds the rest.
   * The pieces are views of held, chunk and the marker, each ending on a character boundary when
   * the input is valid UTF-8 (a character cut by the chunk boundary is joined in a small piece).
   */
  const drain = (chunk: Uint8Array, final: boolean): Buffer[] => {
    const chunkStart = position - chunk.length;
    const byteAt = (offset: number): number =>
      offset >= chunkStart ? chunk[offset - chunkStart]! : held[offset - heldStart]!;
    const pieces: Buffer[] = [];
    const emit = (from: number, to: number): void => {
      let at = Math.max(from, chunkStart) - chunkStart; // where the chunk's piece starts
      if (from < chunkStart) {
        const head = held.subarray(from - heldStart, Math.min(to, chunkStart) - heldStart);
        // The continuation bytes that finish a character begun in held go with it.
        const end = to - chunkStart;
        let k = 0;
        while (k < 3 && k < end && (chunk[k]! & 0xc0) === 0x80) k++;
        pieces.push(k === 0 ? head : Buffer.concat([head, chunk.subarray(0, k)]));
        at = k;
      }
      if (to - chunkStart > at) pieces.push(view(chunk.subarray(at, to - chunkStart)));
    };
    const safe = back(position, automaton.lookback(state));
    let resolved = 0;
    for (; resolved < pending.length && (final || pending[resolved]! <= safe); resolved += 2) {
      const start = pending[resolved]!;
      if (start > emitted) emit(emitted, start);
      pieces.push(MARKER);
      onMarker?.();
      emitted = pending[resolved + 1]!;
      markerEnd = emitted;
    }
    if (resolved > 0) pending = pending.slice(resolved);
    const limit = final ? position : characterBoundary(byteAt, emitted, safe);
    if (limit > emitted) {
      emit(emitted, limit);
      emitted = limit;
      markerEnd = -1;
    }
    const keepFrom = Math.min(emitted, safe);
    if (keepFrom > heldStart) {
      heldContext = joinContext((k) => byteAt(heldStart + k), keepFrom - heldStart, heldContext);
      let drop = 0;
      while (drop < breaks.length && breaks[drop]! < keepFrom) drop++;
      if (drop > 0) breaks = breaks.slice(drop);
    }
    const kept: Uint8Array[] = [];
    if (keepFrom < chunkStart) kept.push(held.subarray(keepFrom - heldStart));
    kept.push(chunk.subarray(Math.max(keepFrom, chunkStart) - chunkStart));
    held = Buffer.concat(kept);
    heldStart = keepFrom;
    return pieces;
  };

  /** The pieces as one buffer: the only piece as it is (a view, no copy), else joined. */
  const joined = (pieces: Buffer[]): Buffer =>
    pieces.length === 1 && pieces[0] !== MARKER ? pieces[0]! : Buffer.concat(pieces);

  /** Invariant 5: a new matcher rescans, from its start state, the bytes still held. */
  const sync = (): void => {
    const current = registry.matcher();
    if (current === automaton) return;
    automaton = current;
    pending = [];
    breaks = [];
    state = automaton.scan(held, 0, held.length, automaton.start, heldStart, found, heldContext);
    recordFound();
  };

  const writeParts = (chunk: Uint8Array): Buffer[] => {
    sync();
    state = automaton.scan(chunk, 0, chunk.length, state, position, found, context);
    position += chunk.length;
    context = joinContext((k) => chunk[k]!, chunk.length, context);
    recordFound();
    return drain(chunk, false);
  };

  const empty = new Uint8Array(0);
  return {
    write: (chunk) => joined(writeParts(chunk)),
    writeParts,
    flush() {
      sync();
      return joined(drain(empty, true));
    },
    get emitted() {
      return emitted;
    },
  };
}
