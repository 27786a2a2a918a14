// Human tables by default; `-o json` for scripts.
export type OutputFormat = 'table' | 'json';

export interface Io {
  out(text: string): void;
  err(text: string): void;
  /** True when stderr is a terminal (progress is shown only then). */
  errIsTty: boolean;
  /** True when stdout is a terminal. */
  outIsTty: boolean;
  /** Calls `handler` on Ctrl-C (SIGINT) until the returned function is called. */
  onInterrupt(handler: () => void): () => void;
}

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** `1 resource`, `3 resources`: a count with its noun in the right number. */
export function counted(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** A spinner line on stderr while `work` runs, only on a terminal. */
export async function withProgress<T>(io: Io, label: string, work: () => Promise<T>): Promise<T> {
  if (!io.errIsTty) return await work();
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  let i = 0;
  const timer = setInterval(() => io.err(`\r${frames[i++ % frames.length]} ${label}`), 80);
  try {
    return await work();
  } finally {
    clearInterval(timer);
    io.err(`\r\u001b[2K`);
  }
}
