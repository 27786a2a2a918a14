// What the retention pruner deletes: one line per kind of row, each a table, the timestamp
// column its age counts from and how long it is kept. A domain whose table has a retention adds
// its line here (usage events: usage-meter; export payloads: data-export; payment-processor
// events: billing, 90 days), and retention.job.ts needs no change.
// What must hold for every line:
// - `column` is indexed (alone or first), so each bounded batch reads only the rows it deletes.
// - `key` is the table's primary key (a batch deletes by it).
// - `where`, when set, is a fixed SQL condition naming only the table's own columns.
export interface Prunable {
  /** What the rows are, for the task's lines and the log ("log events"). */
  what: string;
  table: string;
  key: string;
  /** The timestamp the age counts from; a row whose `column` is null is never pruned. */
  column: string;
  keepDays: number;
  where?: string;
}

export const PRUNABLE: readonly Prunable[] = [
  { what: 'log events', table: 'log_events', key: 'id', column: 'created_at', keepDays: 90 },
  // A turn's recorded changes (conversations/work/changes-turns.ts) are kept as long as its log.
  { what: 'turn changes', table: 'turn_changes', key: 'turn_id', column: 'created_at', keepDays: 90 },
  { what: 'audit events', table: 'audit_events', key: 'id', column: 'created_at', keepDays: 365 },
  // created_at is the end of what the row meters (usage/README): the age counts from that end.
  { what: 'usage events', table: 'usage_events', key: 'id', column: 'created_at', keepDays: 400 },
  { what: 'revoked API keys', table: 'api_keys', key: 'id', column: 'revoked_at', keepDays: 30 },
  // Payment-processor events (billing webhook claims and failures): 90 days from receipt.
  {
    what: 'payment-processor events',
    table: 'billing_events',
    key: 'id',
    column: 'received_at',
    keepDays: 90,
  },
  // An expired key that was never revoked: kept as long as a revoked one, so its owner still
  // sees it listed as expired for a while.
  {
    what: 'expired API keys',
    table: 'api_keys',
    key: 'id',
    column: 'expires_at',
    keepDays: 30,
    where: 'revoked_at IS NULL',
  },
];
