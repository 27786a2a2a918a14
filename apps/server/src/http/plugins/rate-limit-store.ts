// The per-IP rate-limit counters in PostgreSQL (RATE_LIMIT_STORE=postgres): one count per client
// address and limiter, shared by every replica on the database, where the default store keeps a
// count per node in memory (so N replicas let one address make N times the limit).
//
// What must hold (rate-limit-store.test.ts):
// 1. A hit is one statement (HIT_SQL): a row whose window has ended starts again at 1 with a new
//    window, else it counts up; the answer is the count after this hit and the milliseconds left
//    in the window. Concurrent hits from several replicas each count once (the upsert locks the
//    row). Test: "two server instances on one database share one limit".
// 2. Each limiter counts in a bucket of its own: `api` for the general limit, `route` for a
//    route's own budget (auth-rate-limit.ts puts the route into its keys), then the client key.
// 3. Buckets whose window has ended are deleted every SWEEP_INTERVAL_MS by each replica (a
//    repeated delete is harmless); a hit on an ended bucket resets it anyway.
// 4. A database that cannot answer does not block requests: the limiter lets them through
//    (skipOnError in app.ts), since every route but the health probes and the console's files
//    needs the database and answers 503 meanwhile.
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type pg from 'pg';

const HIT_SQL = `INSERT INTO rate_limit_buckets AS b (key, hits, resets_at)
  VALUES ($1, 1, now() + make_interval(secs => $2::double precision / 1000))
  ON CONFLICT (key) DO UPDATE SET
    hits = CASE WHEN b.resets_at <= now() THEN 1 ELSE b.hits + 1 END,
    resets_at = CASE WHEN b.resets_at <= now() THEN excluded.resets_at ELSE b.resets_at END
  RETURNING hits, greatest(0, ceil(extract(epoch FROM b.resets_at - now()) * 1000))::integer AS ttl`;

const SWEEP_SQL = 'DELETE FROM rate_limit_buckets WHERE resets_at < now()';
export const SWEEP_INTERVAL_MS = 10 * 60_000;

export interface SharedRateLimitStore {
  /** The store class @fastify/rate-limit instantiates (its `store` option). */
  Store: FastifyRateLimitStoreCtor;
  /** Deletes the ended buckets now (the sweep of invariant 3). */
  sweep(): Promise<void>;
  /** Stops the periodic sweep. */
  close(): void;
}

export function createPostgresRateLimitStore(deps: {
  pool: pg.Pool;
  onSweepError: (err: unknown) => void;
}): SharedRateLimitStore {
  const { pool } = deps;
  class Store implements FastifyRateLimitStore {
    readonly #namespace: string;
    /** @fastify/rate-limit constructs the general limit's store with its options: `api`. */
    constructor(_options?: unknown, namespace = 'api') {
      this.#namespace = namespace;
    }
    incr(key: string, callback: Parameters<FastifyRateLimitStore['incr']>[1], timeWindow: number): void {
      pool
        .query<{ hits: number; ttl: number }>({
          name: 'paddock-rate-limit-hit',
          text: HIT_SQL,
          values: [`${this.#namespace} ${key}`, timeWindow],
        })
        .then(
          (res) => {
            const row = res.rows[0];
            if (row) callback(null, { current: row.hits, ttl: row.ttl });
            else callback(new Error('the rate-limit hit returned no row'));
          },
          (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
        );
    }
    child(): FastifyRateLimitStore {
      return new Store(undefined, 'route');
    }
  }

  const sweep = async () => {
    await pool.query(SWEEP_SQL);
  };
  const timer = setInterval(() => void sweep().catch(deps.onSweepError), SWEEP_INTERVAL_MS);
  timer.unref();
  return { Store, sweep, close: () => clearInterval(timer) };
}
