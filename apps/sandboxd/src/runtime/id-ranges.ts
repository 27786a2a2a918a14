/**
 * Root mode: the host uid/gid ranges sandboxd uses must not overlap the subordinate ids the host hands to
 * its users (/etc/subuid, /etc/subgid): a user whose range overlapped a sandbox's could own that sandbox's
 * files and signal its processes through its own user namespaces. sandboxd refuses to start instead
 * (security.host.test.ts).
 */
import { readFileSync } from 'node:fs';
import { ID_RANGE, ID_SLOTS } from '../config.ts';

export interface SubidFiles {
  uid: string;
  gid: string;
}

export const SYSTEM_SUBID_FILES: SubidFiles = { uid: '/etc/subuid', gid: '/etc/subgid' };

/** `name:first:count` lines (name may be a uid); comments and malformed lines are ignored. */
export function parseSubids(text: string): { line: string; first: number; count: number }[] {
  const out: { line: string; first: number; count: number }[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const [, first, count] = line.split(':');
    if (!/^\d+$/.test(first ?? '') || !/^\d+$/.test(count ?? '')) continue;
    out.push({ line, first: Number(first), count: Number(count) });
  }
  return out;
}

/** The whole id span sandboxd may use with this base: the base's range and one per sandbox slot. */
export function idSpan(idBase: number): { first: number; last: number } {
  return { first: idBase, last: idBase + ID_RANGE * (ID_SLOTS + 1) - 1 };
}

/** Throws a one-line error naming SANDBOXD_ID_BASE when the span overlaps a subordinate id allocation. */
export function assertNoSubidOverlap(idBase: number, files: SubidFiles = SYSTEM_SUBID_FILES): void {
  const { first, last } = idSpan(idBase);
  for (const [kind, file] of [
    ['uid', files.uid],
    ['gid', files.gid],
  ] as const) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // no such file: nothing allocated
    }
    for (const e of parseSubids(text)) {
      if (e.count > 0 && e.first <= last && e.first + e.count - 1 >= first) {
        throw new Error(
          `SANDBOXD_ID_BASE=${idBase} gives sandboxes host ${kind}s ${first}-${last}, which overlap "${e.line}" in ${file}: set SANDBOXD_ID_BASE to a range no user is allocated`,
        );
      }
    }
  }
}
