// Re-joining a still-running turn after its owner died, without losing or duplicating a byte.
//
// What must hold (test: "kill -9 of the server mid-turn loses no byte and duplicates none",
// conversations.kill9.test.ts):
// 1. The backend's attach replays the session's kept output from its beginning, then tails
//    (spec rule 4: there is no offset). The log writer advances turns.stdout_raw_bytes /
//    stderr_raw_bytes in the same transaction as the rows holding those bytes, so the counters
//    say exactly how many raw bytes per stream are already persisted.
// 2. Per stream, exactly `persisted − dropped` bytes are skipped from the replayed head, where
//    `dropped` is what the backend reports it no longer keeps (session_info
//    replay_dropped_bytes); every byte after that goes to the writer as new output.
// 3. Skipping happens on raw bytes before the writer, so a chunk that straddles the boundary is
//    split at the exact byte.
import type { OutputSink } from './output-sink.ts';

export interface RawCounts {
  stdout: number;
  stderr: number;
}

/** What a session_info says the backend no longer keeps of each stream's head (0 when nothing). */
export function replayDropped(message: Record<string, unknown>): RawCounts {
  const dropped =
    message['type'] === 'session_info'
      ? (message['replay_dropped_bytes'] as Partial<RawCounts> | undefined)
      : undefined;
  const count = (n: unknown) => {
    const v = Number(n ?? 0);
    return Number.isFinite(v) && v > 0 ? v : 0;
  };
  return { stdout: count(dropped?.stdout), stderr: count(dropped?.stderr) };
}

/** The skip-the-persisted-head wrapper of one attach, fed the session_info first (invariant 2). */
export function replayDeduplicator(persisted: RawCounts): {
  onInfo(message: Record<string, unknown>): void;
  wrap(sink: OutputSink): OutputSink;
  /** Bytes of each stream still to skip (0 once the live tail is reached). */
  remaining(): RawCounts;
} {
  const skip: RawCounts = { ...persisted };
  const cut = (stream: keyof RawCounts, chunk: Buffer): Buffer | null => {
    if (skip[stream] <= 0) return chunk;
    if (chunk.length <= skip[stream]) {
      skip[stream] -= chunk.length;
      return null;
    }
    const rest = chunk.subarray(skip[stream]);
    skip[stream] = 0;
    return rest;
  };
  return {
    onInfo(message) {
      const dropped = replayDropped(message);
      for (const stream of ['stdout', 'stderr'] as const) {
        if (dropped[stream] > 0) skip[stream] = Math.max(0, persisted[stream] - dropped[stream]);
      }
    },
    wrap(sink) {
      return {
        stdout: (chunk) => {
          const rest = cut('stdout', chunk);
          if (rest) sink.stdout(rest);
        },
        stderr: (chunk) => {
          const rest = cut('stderr', chunk);
          if (rest) sink.stderr(rest);
        },
      };
    },
    remaining: () => ({ ...skip }),
  };
}
