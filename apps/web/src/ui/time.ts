/** "3 min ago", "in 2 h": short, for lists; the exact time goes in a title attribute. */
export function relativeTime(iso: string, now = Date.now()): string {
  const diff = Math.round((new Date(iso).getTime() - now) / 1000);
  const abs = Math.abs(diff);
  const unit =
    abs < 45
      ? null
      : abs < 3600
        ? ['min', 60]
        : abs < 86_400
          ? ['h', 3600]
          : abs < 2_592_000
            ? ['d', 86_400]
            : null;
  if (abs < 45) return 'just now';
  if (!unit) return new Date(iso).toLocaleDateString();
  const n = Math.round(abs / (unit[1] as number));
  return diff < 0 ? `${n} ${unit[0]} ago` : `in ${n} ${unit[0]}`;
}

/** 812 → "812 ms", 61_000 → "1 min 1 s". */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${(ms / 1000).toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
