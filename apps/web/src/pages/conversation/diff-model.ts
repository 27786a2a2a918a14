// A unified diff (one file's `git diff` section) as rows for the Changes tab: the unified view
// (one row per line, both line numbers) and the split view (old beside new, a run of removed
// lines paired with the run of added lines that follows it).

export type DiffLineKind = 'context' | 'add' | 'del' | 'hunk' | 'meta';

export interface DiffLine {
  kind: DiffLineKind;
  text: string;
  oldNo: number | null;
  newNo: number | null;
}

export interface SplitRow {
  kind: 'pair' | 'hunk' | 'meta';
  left: DiffLine | null;
  right: DiffLine | null;
}

const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

export function parsePatch(patch: string): DiffLine[] {
  const lines: DiffLine[] = [];
  let oldNo = 0;
  let newNo = 0;
  let inHunk = false;
  for (const raw of patch.replace(/\n$/, '').split('\n')) {
    const hunk = HUNK.exec(raw);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
      inHunk = true;
      lines.push({ kind: 'hunk', text: raw, oldNo: null, newNo: null });
    } else if (!inHunk || raw.startsWith('\\')) {
      // The file header (diff --git, index, ---, +++, rename from/to) and "\ No newline at end of file".
      if (!raw.startsWith('diff --git ') && !raw.startsWith('--- ') && !raw.startsWith('+++ '))
        lines.push({ kind: 'meta', text: raw, oldNo: null, newNo: null });
    } else if (raw.startsWith('+'))
      lines.push({ kind: 'add', text: raw.slice(1), oldNo: null, newNo: newNo++ });
    else if (raw.startsWith('-'))
      lines.push({ kind: 'del', text: raw.slice(1), oldNo: oldNo++, newNo: null });
    else lines.push({ kind: 'context', text: raw.slice(1), oldNo: oldNo++, newNo: newNo++ });
  }
  return lines;
}

export function splitRows(lines: DiffLine[]): SplitRow[] {
  const rows: SplitRow[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i] as DiffLine;
    if (line.kind === 'hunk' || line.kind === 'meta') {
      rows.push({ kind: line.kind, left: line, right: null });
      i++;
    } else if (line.kind === 'context') {
      rows.push({ kind: 'pair', left: line, right: line });
      i++;
    } else {
      const dels: DiffLine[] = [];
      const adds: DiffLine[] = [];
      while (lines[i]?.kind === 'del') dels.push(lines[i++] as DiffLine);
      while (lines[i]?.kind === 'add') adds.push(lines[i++] as DiffLine);
      for (let n = 0; n < Math.max(dels.length, adds.length); n++)
        rows.push({ kind: 'pair', left: dels[n] ?? null, right: adds[n] ?? null });
    }
  }
  return rows;
}
