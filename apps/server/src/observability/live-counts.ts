// The cluster's live conversations and sandboxes, counted by status for the scrape-time gauges
// of metrics.ts (paddock_live_conversations, paddock_live_sandboxes). Both counts read only the
// rows of the partial indexes on the live statuses (migration 0020), so a scrape stays cheap
// however many ended rows the tables hold. Cluster-wide, not tenant-scoped: a count, no row.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { LiveCounts } from './metrics.ts';

export async function readLiveCounts(db: Db): Promise<LiveCounts> {
  const { rows } = await sql<{ kind: 'conversation' | 'sandbox'; status: string; n: string }>`
    SELECT 'conversation' AS kind, status, count(*)::text AS n FROM conversations
      WHERE status IN ('pending', 'running') GROUP BY status
    UNION ALL
    SELECT 'sandbox' AS kind, status, count(*)::text AS n FROM sandboxes
      WHERE status IN ('pending', 'starting', 'ready') GROUP BY status`.execute(db);
  const counts: LiveCounts = { conversations: {}, sandboxes: {} };
  for (const row of rows) {
    const into = row.kind === 'conversation' ? counts.conversations : counts.sandboxes;
    into[row.status] = Number(row.n);
  }
  return counts;
}
