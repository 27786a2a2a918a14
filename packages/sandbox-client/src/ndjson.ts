/**
 * Splits an NDJSON body into parsed lines as bytes arrive. Blank lines are
 * skipped; a line that is not a JSON object is handed over as `{ type: 'text',
 * data }` so a caller can log it rather than lose it.
 */
export async function* readNdjson(body: ReadableStream<Uint8Array>): AsyncGenerator<Record<string, unknown>> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of body) {
    pending += decoder.decode(chunk, { stream: true });
    let newline = pending.indexOf('\n');
    while (newline !== -1) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      const parsed = parseLine(line);
      if (parsed) yield parsed;
      newline = pending.indexOf('\n');
    }
  }
  pending += decoder.decode();
  const last = parseLine(pending);
  if (last) yield last;
}

function parseLine(line: string): Record<string, unknown> | undefined {
  const trimmed = line.trim();
  if (trimmed.length === 0) return undefined;
  try {
    const value = JSON.parse(trimmed) as unknown;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
  } catch {
    // Fall through: not JSON.
  }
  return { type: 'text', data: trimmed };
}
