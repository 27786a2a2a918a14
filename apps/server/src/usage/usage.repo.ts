// The reads of the usage meter: one account's usage events that ended in [from, to), summed.
// Served by usage_events_tenant_ended_idx (migration 0029).
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

export interface UsageTotals {
  sandboxes: number;
  failedBeforeReady: number;
  busySeconds: number;
  parkedSeconds: number;
  turns: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  /** Null when no turn of the range reported a cost. */
  costUsd: number | null;
}

export interface ModelUsage {
  runtime: string | null;
  model: string | null;
  turns: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  costUsd: number | null;
}

const num = (v: string | number | null | undefined): number => Number(v ?? 0);
const orNull = (v: string | number | null | undefined): number | null => (v == null ? null : Number(v));

function inRange(db: Db, tenantId: string, from: Date, to: Date) {
  return db
    .selectFrom('usage_events')
    .where('tenant_id', '=', tenantId)
    .where('ended_at', '>=', from)
    .where('ended_at', '<', to);
}

export async function usageTotals(db: Db, tenantId: string, from: Date, to: Date): Promise<UsageTotals> {
  const row = await inRange(db, tenantId, from, to)
    .select([
      sql<string>`count(*) FILTER (WHERE kind = 'sandbox')`.as('sandboxes'),
      sql<string>`count(*) FILTER (WHERE kind = 'sandbox' AND ready_at IS NULL)`.as('failed_before_ready'),
      sql<number>`coalesce(sum(busy_seconds) FILTER (WHERE kind = 'sandbox'), 0)`.as('busy'),
      sql<number>`coalesce(sum(parked_seconds) FILTER (WHERE kind = 'sandbox'), 0)`.as('parked'),
      sql<string>`count(*) FILTER (WHERE kind = 'turn')`.as('turns'),
      sql<string>`coalesce(sum(input_tokens), 0)`.as('input_tokens'),
      sql<string>`coalesce(sum(output_tokens), 0)`.as('output_tokens'),
      sql<string>`coalesce(sum(cache_read_tokens), 0)`.as('cache_read_tokens'),
      sql<string | null>`sum(cost_usd)`.as('cost_usd'),
    ])
    .executeTakeFirstOrThrow();
  return {
    sandboxes: num(row.sandboxes),
    failedBeforeReady: num(row.failed_before_ready),
    busySeconds: num(row.busy),
    parkedSeconds: num(row.parked),
    turns: num(row.turns),
    inputTokens: num(row.input_tokens),
    outputTokens: num(row.output_tokens),
    cacheReadTokens: num(row.cache_read_tokens),
    costUsd: orNull(row.cost_usd),
  };
}

/** The range's turns per runtime and model, most turns first. */
export async function usageByModel(db: Db, tenantId: string, from: Date, to: Date): Promise<ModelUsage[]> {
  const rows = await inRange(db, tenantId, from, to)
    .where('kind', '=', 'turn')
    .select([
      'runtime',
      'model',
      sql<string>`count(*)`.as('turns'),
      sql<string>`coalesce(sum(input_tokens), 0)`.as('input_tokens'),
      sql<string>`coalesce(sum(output_tokens), 0)`.as('output_tokens'),
      sql<string>`coalesce(sum(cache_read_tokens), 0)`.as('cache_read_tokens'),
      sql<string | null>`sum(cost_usd)`.as('cost_usd'),
    ])
    .groupBy(['runtime', 'model'])
    .orderBy(sql`count(*)`, 'desc')
    .orderBy('runtime')
    .orderBy('model')
    .execute();
  return rows.map((r) => ({
    runtime: r.runtime,
    model: r.model,
    turns: num(r.turns),
    inputTokens: num(r.input_tokens),
    outputTokens: num(r.output_tokens),
    cacheReadTokens: num(r.cache_read_tokens),
    costUsd: orNull(r.cost_usd),
  }));
}
