// The output handlers of one exec: turn.ts hands the turn's stdout and stderr to them, and
// reattach.ts wraps them to drop the replayed head (its own file, so neither imports the other).
export interface OutputSink {
  stdout(chunk: Buffer): void;
  stderr(chunk: Buffer): void;
}
