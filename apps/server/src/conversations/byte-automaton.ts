// Aho-Corasick over bytes: one pass over the input finds every occurrence of every pattern,
// whatever the number of patterns (redaction must not cost one indexOf per secret). Built once
// per set of patterns, immutable, shared by every stream that scans with it.
//
// Layout (why it is fast in JS and small in memory):
// - Bytes are mapped to classes (the bytes that occur in some pattern, plus class 0 for all
//   others), so a transition row has `classes` entries instead of 256.
// - States are numbered in breadth-first order. The shallow states (where a scan spends nearly
//   all its time) get a full transition row in one Int32Array (`rows`), each entry already the
//   offset of the target's row, so the hot loop is three loads (byte, class, entry) and a sign
//   test per byte. An entry is negative (-(target + 1)) when the target ends a pattern or is a
//   deep state: the slow path.
// - Deep states keep only their trie children (contiguous ids, thanks to the BFS numbering)
//   and a failure link, so memory stays proportional to the total length of the patterns.
// - When every pattern is at least MIN_SKIP_LENGTH bytes long, a skip table (Wu-Manber over
//   blocks of 3 bytes of the patterns' first m bytes, m the shortest length) lets the scan jump
//   over windows where no occurrence can start, without reading them: the redactor got 2× faster
//   with 100 secrets on agent-like output (docs/performance.md, "Redaction"). Where the
//   table does not help (small alphabets, many short patterns) a scan falls back to the plain
//   loop after PROBE_BYTES, so such text costs what it did without the table.
// - Line breaks inside wrapped base64 are passed over (joined): a CR or LF that follows at least
//   JOIN_RUN base64 characters (one CR right before an LF not counted) is not part of the text
//   the patterns are matched in, so `base64` output wrapped at 76 columns, openssl's and PEM's 64
//   or MIME's 76 with CRLF matches the unwrapped patterns across its line breaks. The rule looks
//   only at bytes already read (a chunk boundary never waits for the next byte), and a break is
//   joined only inside a partial match (at the start state it changes nothing).
// What must hold:
// - scan() reports, for every input position that ends an occurrence of some pattern in the
//   joined text (the input without its joined breaks, joinedText()), the length of the LONGEST
//   pattern ending there (shorter ones ending there are inside it), with or without the skip
//   table; and, with length 0, every joined break inside a partial match, so that a caller can
//   map an occurrence back to the input bytes it covers.
// - `lookback[state]` bounds how far back an occurrence not yet complete can start: every
//   future occurrence starts at or after (position − lookback), counted in joined text (the
//   joined breaks reported since are not counted). It is < the longest pattern.
//   (A jump drops partial matches that cannot complete: the bound holds for every occurrence
//   that can.)
//   Tests: byte-automaton.test.ts (against a naive search over random patterns and text, whole
//   and in random chunks, with patterns short enough to leave the table out and long enough to
//   use it).

export interface ByteAutomaton {
  /** The longest pattern's length (0 when there are no patterns). */
  readonly longest: number;
  /** How many states the automaton has (for measurements). */
  readonly states: number;
  /** The state before any byte. */
  readonly start: number;
  /**
   * Feeds buf[from, to) from `state`. For each occurrence found, pushes (stream offset of the
   * byte after its end, its length in joined text) onto `found`, and (stream offset of the byte
   * after it, 0) for each break it joined; `offset` is the stream offset of buf[0]. `context` is
   * joinContext() of the bytes before buf[0] (0 at the start of a stream). Returns the state
   * after the last byte.
   */
  scan(
    buf: Uint8Array,
    from: number,
    to: number,
    state: number,
    offset: number,
    found: number[],
    context?: number,
  ): number;
  /** How many of the last bytes fed may still begin an occurrence (< longest; 0 without patterns). */
  lookback(state: number): number;
}

const LF = 0x0a;
const CR = 0x0d;
/**
 * How many base64 characters must precede a line break for it to be joined: fewer than the
 * narrowest width the common tools wrap at (PEM and openssl 64, GNU base64 and MIME 76, OpenSSH 70,
 * uuencode -m 60), more than ordinary words and identifiers at the end of a line.
 */
export const JOIN_RUN = 16;
/** 1 for the characters of both base64 alphabets (not '=': padding ends a blob). */
const BASE64 = new Uint8Array(256);
for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_')
  BASE64[ch.charCodeAt(0)] = 1;

/**
 * The join context after `length` bytes read through `byteAt` (offsets 0 … length − 1), given the
 * context before them: (run << 1) | (last byte is CR), where run counts, up to JOIN_RUN, the
 * base64 characters that end the bytes read (before a final CR, when there is one).
 */
export function joinContext(byteAt: (offset: number) => number, length: number, before: number): number {
  if (length === 0) return before;
  const cr = byteAt(length - 1) === CR ? 1 : 0;
  let k = length - 1 - cr;
  let run = 0;
  while (k >= 0 && run < JOIN_RUN && BASE64[byteAt(k)] === 1) {
    run++;
    k--;
  }
  if (k < 0 && run < JOIN_RUN && (before & 1) === 0) run = Math.min(JOIN_RUN, run + (before >> 1));
  return (run << 1) | cr;
}

/** Whether the break at buf[at] (a CR or LF) is joined: JOIN_RUN base64 characters precede it. */
function joins(buf: Uint8Array, at: number, context: number): boolean {
  if (at === 0) return context >> 1 >= JOIN_RUN;
  let k = buf[at - 1] === CR ? at - 2 : at - 1;
  // Most breaks end ordinary text: one byte of the run's far half usually says so at once.
  if (k >= JOIN_RUN && (BASE64[buf[k - (JOIN_RUN >> 1)]!] !== 1 || BASE64[buf[k - JOIN_RUN + 1]!] !== 1))
    return false;
  let run = 0;
  while (k >= 0 && run < JOIN_RUN && BASE64[buf[k]!] === 1) {
    run++;
    k--;
  }
  if (run < JOIN_RUN && k < 0 && (context & 1) === 0) run += context >> 1;
  return run >= JOIN_RUN;
}

/**
 * The bytes with every break removed that the scan would join (whether or not a partial match
 * is in progress, which changes no occurrence), and for each byte kept its offset in `bytes`:
 * the text the patterns are matched in, for references (tests) and for a pattern with breaks.
 */
export function joinedText(bytes: Uint8Array): { text: Buffer; offsets: number[] } {
  const kept: number[] = [];
  const offsets: number[] = [];
  for (let at = 0; at < bytes.length; at++) {
    const b = bytes[at]!;
    if ((b === LF || b === CR) && joins(bytes, at, 0)) continue;
    kept.push(b);
    offsets.push(at);
  }
  return { text: Buffer.from(kept), offsets };
}

/** Cap on the dense rows, in entries (4 bytes each), beyond those of depth ≤ 1. */
const DENSE_ENTRIES = 1 << 19;

export interface BuildOptions {
  /** Overrides the dense-row budget (tests use 0 to exercise the sparse states). */
  denseEntries?: number;
}

export function buildByteAutomaton(
  patterns: readonly Uint8Array[],
  { denseEntries = DENSE_ENTRIES }: BuildOptions = {},
): ByteAutomaton {
  // Byte classes, in byte order, so sorted patterns give sorted class sequences.
  const used = new Uint8Array(256);
  for (const p of patterns) for (const b of p) used[b] = 1;
  used[LF] = 1; // line breaks get classes of their own: their entries take the slow path (joins)
  used[CR] = 1;
  const classOf = new Uint16Array(256);
  let classes = 1;
  for (let b = 0; b < 256; b++) if (used[b]) classOf[b] = classes++;

  // 1. Trie from the sorted, deduplicated patterns: each pattern shares its longest common
  //    prefix with the previous one and appends the rest, always as the last child (sorted).
  const sorted = patterns.filter((p) => p.length > 0).sort(Buffer.compare);
  let capacity = 1;
  for (const p of sorted) capacity += p.length;
  const firstChild = new Int32Array(capacity).fill(-1);
  const lastChild = new Int32Array(capacity).fill(-1);
  const nextSibling = new Int32Array(capacity).fill(-1);
  const edge = new Uint16Array(capacity);
  const ends = new Int32Array(capacity); // pattern length when the node ends one, else 0
  let nodes = 1;
  const path: number[] = [0];
  let previous: Uint8Array = new Uint8Array(0);
  let longest = 0;
  for (const p of sorted) {
    let common = 0;
    while (common < p.length && common < previous.length && p[common] === previous[common]) common++;
    path.length = common + 1;
    let node = path[common]!;
    for (let i = common; i < p.length; i++) {
      const child = nodes++;
      edge[child] = classOf[p[i]!]!;
      if (lastChild[node] === -1) firstChild[node] = child;
      else nextSibling[lastChild[node]!] = child;
      lastChild[node] = child;
      path.push(child);
      node = child;
    }
    ends[node] = p.length;
    if (p.length > longest) longest = p.length;
    previous = p;
  }

  // 2. Breadth-first renumbering: children of a state get consecutive ids.
  const order = new Int32Array(nodes); // new id → old id
  const parent = new Int32Array(nodes);
  const depth = new Int32Array(nodes);
  const childStart = new Int32Array(nodes);
  const childCount = new Int32Array(nodes);
  const inClass = new Uint16Array(nodes);
  const own = new Int32Array(nodes);
  let tail = 1;
  for (let id = 0; id < nodes; id++) {
    const old = order[id]!;
    own[id] = ends[old]!;
    childStart[id] = tail;
    for (let c = firstChild[old]!; c !== -1; c = nextSibling[c]!) {
      order[tail] = c;
      parent[tail] = id;
      depth[tail] = depth[id]! + 1;
      inClass[tail] = edge[c]!;
      tail++;
    }
    childCount[id] = tail - childStart[id]!;
  }

  // Dense states: all of depth ≤ 1, then whole BFS levels while they fit the budget.
  let dense = Math.min(nodes, 1 + childCount[0]!);
  while (dense < nodes) {
    const level = depth[dense]!;
    let next = dense;
    while (next < nodes && depth[next] === level) next++;
    if (next * classes > denseEntries) break;
    dense = next;
  }

  // 3. Failure links, longest-match outputs and lookbacks, in BFS order (a state's failure
  //    target is shallower, hence already done). Dense rows hold full transitions (state ids).
  const fail = new Int32Array(nodes);
  const out = new Int32Array(nodes);
  const back = new Int32Array(nodes);
  const rows = new Int32Array(dense * classes);
  const childOn = (s: number, c: number): number => {
    const first = childStart[s]!;
    const last = first + childCount[s]!;
    for (let k = first; k < last; k++) if (inClass[k] === c) return k;
    return -1;
  };
  const go = (s: number, c: number): number => {
    for (;;) {
      if (s < dense) return rows[s * classes + c]!;
      const k = childOn(s, c);
      if (k !== -1) return k;
      s = fail[s]!;
    }
  };
  for (let s = 0; s < nodes; s++) {
    const p = parent[s]!;
    const f = s === 0 || p === 0 ? 0 : go(fail[p]!, inClass[s]!);
    fail[s] = f;
    out[s] = Math.max(own[s]!, s === 0 ? 0 : out[f]!);
    back[s] = childCount[s]! > 0 ? depth[s]! : s === 0 ? 0 : back[f]!;
    if (s < dense) {
      const row = s * classes;
      const inherited = f * classes;
      for (let c = 0; c < classes; c++) rows[row + c] = s === 0 ? 0 : rows[inherited + c]!;
      const first = childStart[s]!;
      const last = first + childCount[s]!;
      for (let k = first; k < last; k++) rows[row + inClass[k]!] = k;
    }
  }
  // Encode: a plain dense target as its row offset, anything else as -(target + 1).
  // A line break from a state other than the start takes the slow path too: it may be joined.
  const breakClasses = [classOf[LF]!, classOf[CR]!];
  for (let i = 0; i < rows.length; i++) {
    const t = rows[i]!;
    const joinable = i >= classes && breakClasses.includes(i % classes);
    rows[i] = t < dense && out[t] === 0 && !joinable ? t * classes : -(t + 1);
  }

  // The scan reads only constants of this scope, so V8 can keep them in registers.
  const shallow = dense;
  const width = classes;
  const plain: ByteAutomaton['scan'] = (buf, from, to, state, offset, found, context = 0) => {
    let s = state;
    let i = from;
    while (i < to) {
      if (s < shallow) {
        // Hot loop: shallow states without an output.
        let r = s * width;
        let n = 0;
        do {
          n = rows[r + classOf[buf[i++]!]!]!;
          if (n < 0) break;
          r = n;
        } while (i < to);
        if (n >= 0) return r / width;
        const b = buf[i - 1]!;
        if (r !== 0 && (b === LF || b === CR) && joins(buf, i - 1, context)) {
          found.push(offset + i, 0);
          s = r / width;
          continue;
        }
        s = -n - 1;
      } else {
        // A deep state: its children, else its failure link, down to a shallow state.
        const b = buf[i++]!;
        if ((b === LF || b === CR) && joins(buf, i - 1, context)) {
          found.push(offset + i, 0);
          continue;
        }
        const c = classOf[b]!;
        for (;;) {
          if (s < shallow) {
            const n = rows[s * width + c]!;
            s = n >= 0 ? n / width : -n - 1;
            break;
          }
          const first = childStart[s]!;
          const last = first + childCount[s]!;
          let k = first;
          while (k < last && inClass[k] !== c) k++;
          if (k < last) {
            s = k;
            break;
          }
          s = fail[s]!;
        }
      }
      const length = out[s]!;
      if (length !== 0) found.push(offset + i, length);
    }
    return s;
  };
  const skip = buildSkip(sorted);
  return {
    longest,
    states: nodes,
    start: 0,
    lookback: (state) => back[state]!,
    scan: skip === null ? plain : skipping(skip, depth, plain),
  };
}

/** Patterns shorter than this leave the skip out: its jumps would be too short to pay. */
const MIN_SKIP_LENGTH = 8;
/** Bytes per block of the skip table. */
const BLOCK = 3;
/** Bytes a scan walks before it compares them with the bytes it jumped (see skipping()). */
const PROBE_BYTES = 1024;

interface Skip {
  /** The shortest pattern's length. */
  m: number;
  /** shift[hash(block)]: how far a window ending in this block can move on (see skipping()). */
  shift: Uint8Array;
  bits: number;
}

const blockHash = (b0: number, b1: number, b2: number, bits: number): number =>
  Math.imul((b0 << 16) | (b1 << 8) | b2, 0x9e3779b1) >>> (32 - bits);

/**
 * The skip table (Wu-Manber over the patterns' first m bytes, m the shortest length): for every
 * block of BLOCK bytes ending at index q (BLOCK − 1 ≤ q < m) of some pattern's first m bytes,
 * shift[hash] ≤ m − 1 − q − slack; other entries hold m − BLOCK + 1 (less slack when slack > 2).
 * Hash collisions and the byte cap only lower entries, which only makes jumps shorter. The
 * slack: how many places joined breaks in a window can move the pattern's bytes to the right
 * (see skipping()).
 */
function buildSkip(patterns: readonly Uint8Array[]): Skip | null {
  if (patterns.length === 0) return null;
  let m = Number.POSITIVE_INFINITY;
  for (const p of patterns) if (p.length < m) m = p.length;
  if (m < MIN_SKIP_LENGTH) return null;
  // A joined break is a CR and an LF at most, after JOIN_RUN bytes that are not breaks.
  const slack = 2 * Math.ceil(m / (JOIN_RUN + 1));
  const blocks = patterns.length * (m - BLOCK + 1);
  const bits = Math.min(20, Math.max(12, Math.ceil(Math.log2(blocks * 8))));
  const shift = new Uint8Array(1 << bits).fill(
    Math.max(0, Math.min(255, m - BLOCK + 1 - (slack > 2 ? slack : 0))),
  );
  for (const p of patterns) {
    for (let q = BLOCK - 1; q < m; q++) {
      const h = blockHash(p[q - 2]!, p[q - 1]!, p[q]!, bits);
      const k = Math.max(0, m - 1 - q - slack);
      if (k < shift[h]!) shift[h] = k;
    }
  }
  return { m, shift, bits };
}

/**
 * The scan with the skip table. In state s of depth d before byte i, every occurrence not yet
 * reported starts at or after p = i − d (the state is the longest suffix of the input that begins
 * a pattern). Every occurrence starting in [p, p + k) covers byte j = p + m − 1 with the first m
 * bytes of its pattern, the block ending at j at one of the pattern's indexes m − k … m − 1; so
 * when shift[block ending at j] = k, none starts there, and when k > d the scan goes on from the
 * start state at p + k, past bytes it never reads. The partial matches it drops cannot complete,
 * so lookback() of the state it returns still covers every occurrence that can. Joined breaks:
 * those already read do not matter (j is counted from i, in bytes not yet read); b break bytes
 * in [i, j] put byte j at the pattern's index m − 1 − δ − b, so an occurrence at p + δ has
 * shift ≤ δ + b − slack ≤ δ there (b ≤ slack: breaks are JOIN_RUN bytes apart), provided the
 * block is one of the pattern's (index ≥ 2): it is, since the break lies in [p + δ, j − 3], so
 * δ ≤ m − 5 and m − 1 − δ − b ≥ 4 − b ≥ 2 when b ≤ 2 (a larger slack lowers the other entries
 * too). So text whose blocks occur in no pattern (nearly all) keeps the full jump. A block that
 * holds a joined break is never jumped on (one that holds a break not joined is text like any
 * other). Otherwise (a candidate window, or its block not inside [from, to)) the automaton runs
 * through byte j, so every byte is read at most once by it. Once a call has walked PROBE_BYTES and jumped fewer than
 * it walked, the table is not paying for its lookups there, and the call ends with the plain scan.
 */
function skipping(skip: Skip, depth: Int32Array, plain: ByteAutomaton['scan']): ByteAutomaton['scan'] {
  const { shift, bits } = skip;
  const last = skip.m - 1;
  return (buf, from, to, state, offset, found, context = 0) => {
    let s = state;
    let i = from;
    let jumped = 0;
    let walked = 0;
    while (i < to) {
      // Text the table does not help with (its windows mostly candidates): the plain scan, for
      // the rest of this call.
      if (walked > PROBE_BYTES && jumped < walked) return plain(buf, i, to, s, offset, found, context);
      const d = depth[s]!;
      const j = i - d + last;
      if (j >= to) return plain(buf, i, to, s, offset, found, context);
      if (j >= i && j - (BLOCK - 1) >= from) {
        const b0 = buf[j - 2]!;
        const b1 = buf[j - 1]!;
        const b2 = buf[j]!;
        const k = shift[blockHash(b0, b1, b2, bits)]!;
        // A block that holds a joined break is no block of the joined text: never jumped on.
        if (
          k > d &&
          !(
            (b0 <= CR || b1 <= CR || b2 <= CR) &&
            (((b0 === LF || b0 === CR) && joins(buf, j - 2, context)) ||
              ((b1 === LF || b1 === CR) && joins(buf, j - 1, context)) ||
              ((b2 === LF || b2 === CR) && joins(buf, j, context)))
          )
        ) {
          i += k - d;
          jumped += k - d;
          s = 0;
          continue;
        }
      }
      // A state deeper than m (inside a long match): one byte at a time until it is not.
      const until = j >= i ? j + 1 : i + 1;
      s = plain(buf, i, until, s, offset, found, context);
      walked += until - i;
      i = until;
    }
    return s;
  };
}
