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
// What must hold:
// - scan() reports, for every input position that ends an occurrence of some pattern, the
//   length of the LONGEST pattern ending there (shorter ones ending there are inside it), with
//   or without the skip table.
// - `lookback[state]` bounds how far back an occurrence not yet complete can start: every
//   future occurrence starts at or after (position − lookback). It is < the longest pattern.
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
   * byte after its end, its length) onto `found`; `offset` is the stream offset of buf[0].
   * Returns the state after the last byte.
   */
  scan(buf: Uint8Array, from: number, to: number, state: number, offset: number, found: number[]): number;
  /** How many of the last bytes fed may still begin an occurrence (< longest; 0 without patterns). */
  lookback(state: number): number;
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
  for (let i = 0; i < rows.length; i++) {
    const t = rows[i]!;
    rows[i] = t < dense && out[t] === 0 ? t * classes : -(t + 1);
  }

  // The scan reads only constants of this scope, so V8 can keep them in registers.
  const shallow = dense;
  const width = classes;
  const plain: ByteAutomaton['scan'] = (buf, from, to, state, offset, found) => {
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
        s = -n - 1;
      } else {
        // A deep state: its children, else its failure link, down to a shallow state.
        const c = classOf[buf[i++]!]!;
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
 * shift[hash] ≤ m − 1 − q; other entries hold m − BLOCK + 1. Hash collisions and the byte cap
 * only lower entries, which only makes jumps shorter.
 */
function buildSkip(patterns: readonly Uint8Array[]): Skip | null {
  if (patterns.length === 0) return null;
  let m = Number.POSITIVE_INFINITY;
  for (const p of patterns) if (p.length < m) m = p.length;
  if (m < MIN_SKIP_LENGTH) return null;
  const blocks = patterns.length * (m - BLOCK + 1);
  const bits = Math.min(20, Math.max(12, Math.ceil(Math.log2(blocks * 8))));
  const shift = new Uint8Array(1 << bits).fill(Math.min(255, m - BLOCK + 1));
  for (const p of patterns) {
    for (let q = BLOCK - 1; q < m; q++) {
      const h = blockHash(p[q - 2]!, p[q - 1]!, p[q]!, bits);
      if (m - 1 - q < shift[h]!) shift[h] = m - 1 - q;
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
 * so lookback() of the state it returns still covers every occurrence that can. Otherwise (a
 * candidate window, or its block not inside [from, to)) the automaton runs through byte j, so
 * every byte is read at most once by it. Once a call has walked PROBE_BYTES and jumped fewer than
 * it walked, the table is not paying for its lookups there, and the call ends with the plain scan.
 */
function skipping(skip: Skip, depth: Int32Array, plain: ByteAutomaton['scan']): ByteAutomaton['scan'] {
  const { shift, bits } = skip;
  const last = skip.m - 1;
  return (buf, from, to, state, offset, found) => {
    let s = state;
    let i = from;
    let jumped = 0;
    let walked = 0;
    while (i < to) {
      // Text the table does not help with (its windows mostly candidates): the plain scan, for
      // the rest of this call.
      if (walked > PROBE_BYTES && jumped < walked) return plain(buf, i, to, s, offset, found);
      const d = depth[s]!;
      const j = i - d + last;
      if (j >= to) return plain(buf, i, to, s, offset, found);
      if (j >= i && j - (BLOCK - 1) >= from) {
        const k = shift[blockHash(buf[j - 2]!, buf[j - 1]!, buf[j]!, bits)]!;
        if (k > d) {
          i += k - d;
          jumped += k - d;
          s = 0;
          continue;
        }
      }
      // A state deeper than m (inside a long match): one byte at a time until it is not.
      const until = j >= i ? j + 1 : i + 1;
      s = plain(buf, i, until, s, offset, found);
      walked += until - i;
      i = until;
    }
    return s;
  };
}
