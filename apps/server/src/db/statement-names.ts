// The names of the prepared statements (prepared.ts registers each SQL text once it is compiled;
// the pool wrapper in database.ts sends a registered text as a named pg statement). A file of
// its own so that neither of the two imports the other.

/** SQL text → statement name, for every prepared query of the process. */
const registry = new Map<string, string>();

export function registerStatementName(sqlText: string, name: string): void {
  registry.set(sqlText, name);
}

export function preparedStatementName(sqlText: string): string | undefined {
  return registry.get(sqlText);
}
