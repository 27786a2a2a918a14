// What the sandbox and redaction benchmarks share: the figure shape, the median, and the
// report (a table for a person on stderr, JSON on stdout; with --json FILE, the table on
// stdout and the JSON in FILE).
import { writeFileSync } from 'node:fs';

export interface Figure {
  name: string;
  unit: string;
  median: number;
  samples: number[];
  /** MB per CPU-second of this process (median), for throughputs. */
  cpu?: number;
  baseline?: string;
  ratio?: number;
  goal?: string;
}

export const median = (samples: number[]): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
};

const round = (value: number): number => Math.round(value * 100) / 100;

export function writeReport(
  header: Record<string, unknown>,
  figures: Figure[],
  options: { json?: string | undefined; ratioLabel?: (figure: Figure) => string } = {},
): void {
  const withCpu = figures.some((figure) => figure.cpu !== undefined);
  const table = [
    ['measure', 'median', 'unit', ...(withCpu ? ['cpu MB/s'] : []), 'ratio', 'goal'],
    ...figures.map((figure) => [
      figure.name,
      String(round(figure.median)),
      figure.unit,
      ...(withCpu ? [figure.cpu === undefined ? '' : String(round(figure.cpu))] : []),
      figure.ratio === undefined ? '' : `${round(figure.ratio)}×${options.ratioLabel?.(figure) ?? ''}`,
      figure.goal ?? '',
    ]),
  ];
  const widths =
    table[0]?.map((_, column) => Math.max(...table.map((row) => (row[column] ?? '').length))) ?? [];
  const text = `${table.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ')).join('\n')}\n`;
  const json = `${JSON.stringify(
    {
      ...header,
      node: process.version,
      figures: figures.map((figure) => ({
        ...figure,
        median: round(figure.median),
        samples: figure.samples.map(round),
        ...(figure.cpu === undefined ? {} : { cpu: round(figure.cpu) }),
        ...(figure.ratio === undefined ? {} : { ratio: round(figure.ratio) }),
      })),
    },
    null,
    2,
  )}\n`;
  if (options.json) {
    process.stdout.write(text);
    writeFileSync(options.json, json);
  } else {
    process.stderr.write(text);
    process.stdout.write(json);
  }
}
