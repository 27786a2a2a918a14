// Counts in words: `1 agent`, `2 agents`, `0 agents`, so no page says "1 active API keys".

/** `n` with its noun in the right number; `plural` when adding an "s" is not the plural. */
export function counted(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}
