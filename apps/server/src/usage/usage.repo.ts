// The reads of the usage meter: one account's usage events that ended in [from, to), summed in
// one scan of usage_events_tenant_ended_idx (migration 0029), grouped by kind, runtime and model;
// the totals are the sums of those few groups.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

export interface TokenSums {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  /** Null when no turn of the group reported a cost. */
  costUsd: number | null;
}

export interface ModelUsage extends TokenSums {
  runtime: string | null;
  model: string | null;
  turns: number;
}

export interface UsageSums {
  sandboxes: number;
  failedBeforeReady: number;
  busySeconds: number;
  parkedSeconds: number;
  turns: TokenSums & { count: number };
  /** Most turns first. */
  byModel: ModelUsage[];
}

const addCost = (a: number | null, b: number | null): number | null =>
  a === null ? b : b === null ? a : a + b;

export async function usageSums(db: Db, tenantId: string, from: Date, to: Date): Promise<UsageSums> {
  const rows = await db
    .selectFrom('usage_events')
    .where('tenant_id', '=', tenantId)
    .where('ended_at', '>=', from)
    .where('ended_at', '<', to)
    .select([
      'kind',
      'runtime',
      'model',
      sql<number>`count(*)::int`.as('n'),
      sql<number>`(count(*) FILTER (WHERE ready_at IS NULL))::int`.as('never_ready'),
      sql<number>`sum(busy_seconds)`.as('busy'),
      sql<number>`sum(parked_seconds)`.as('parked'),
      sql<string>`coalesce(sum(input_tokens), 0)`.as('input_tokens'),
      sql<string>`coalesce(sum(output_tokens), 0)`.as('output_tokens'),
      sql<string>`coalesce(sum(cache_read_tokens), 0)`.as('cache_read_tokens'),
      sql<string | null>`sum(cost_usd)`.as('cost_usd'),
    ])
    .groupBy(['kind', 'runtime', 'model'])
    .execute();
  const sums: UsageSums = {
    sandboxes: 0,
    failedBeforeReady: 0,
    busySeconds: 0,
    parkedSeconds: 0,
    turns: { count: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, costUsd: null },
    byModel: [],
  };
  for (const r of rows) {
    if (r.kind === 'sandbox') {
      sums.sandboxes += r.n;
      sums.failedBeforeReady += r.never_ready;
      sums.busySeconds += Number(r.busy);
      sums.parkedSeconds += Number(r.parked);
      continue;
    }
    const m: ModelUsage = {
      runtime: r.runtime,
      model: r.model,
      turns: r.n,
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      cacheReadTokens: Number(r.cache_read_tokens),
      costUsd: r.cost_usd === null ? null : Number(r.cost_usd),
    };
    sums.byModel.push(m);
    sums.turns.count += m.turns;
    sums.turns.inputTokens += m.inputTokens;
    sums.turns.outputTokens += m.outputTokens;
    sums.turns.cacheReadTokens += m.cacheReadTokens;
    sums.turns.costUsd = addCost(sums.turns.costUsd, m.costUsd);
  }
  sums.byModel.sort(
    (a, b) =>
      b.turns - a.turns ||
      (a.runtime ?? '').localeCompare(b.runtime ?? '') ||
      (a.model ?? '').localeCompare(b.model ?? ''),
  );
  return sums;
}
