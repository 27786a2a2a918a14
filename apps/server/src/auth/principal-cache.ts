// A short-lived, per-process cache of resolved API keys.
//
// Resolving a bearer key is a database round trip on every request; caching the result
// for a couple of seconds roughly doubles the throughput of authenticated reads.
// Invariants (principal-cache.test.ts):
// - An entry lives at most `ttlMs` (2 s): a change made on another replica (revocation,
//   suspension) takes effect here within that bound; on this replica it is immediate,
//   because every such change calls forget() after its transaction commits.
// - A lookup that started before a forget() never repopulates the cache (epochs), so a
//   read racing a revocation cannot resurrect the revoked key.
// - Only positive results are cached; an unknown or revoked key always asks the database.
// - An entry never outlives the key's own expires_at.
import type { Principal, PrincipalCache } from './principal.ts';

export function createPrincipalCache(
  options: { ttlMs?: number; maxEntries?: number; now?: () => number } = {},
): PrincipalCache {
  const ttlMs = options.ttlMs ?? 2000;
  const maxEntries = options.maxEntries ?? 10_000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { principal: Principal; expiresAt: number }>();
  let epoch = 0;

  return {
    epoch: () => epoch,
    get(keyHash) {
      const entry = entries.get(keyHash);
      if (!entry) return undefined;
      if (entry.expiresAt <= now()) {
        entries.delete(keyHash);
        return undefined;
      }
      return entry.principal;
    },
    set(keyHash, principal, startedAtEpoch, notAfter) {
      if (startedAtEpoch !== epoch) return;
      if (entries.size >= maxEntries) {
        // Map iteration is insertion order: drop the oldest entry.
        const oldest = entries.keys().next().value;
        if (oldest !== undefined) entries.delete(oldest);
      }
      entries.set(keyHash, {
        principal,
        expiresAt: Math.min(now() + ttlMs, notAfter ?? Number.POSITIVE_INFINITY),
      });
    },
    forget(match) {
      epoch += 1;
      for (const [hash, entry] of entries) if (match(entry.principal)) entries.delete(hash);
    },
  };
}
