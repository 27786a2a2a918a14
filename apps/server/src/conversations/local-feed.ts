// Stand-in for the feed (feed.ts, issue 9 deliverable 6) until it lands on this branch: the
// same Feed contract, in-process only (no LISTEN/NOTIFY across processes).
import type { Feed, FeedSignal } from './contracts.ts';

export function createLocalFeed(): Feed {
  const listeners = new Map<string, Set<(signal: FeedSignal) => void>>();
  return {
    publish(conversationId, signal) {
      for (const l of listeners.get(conversationId) ?? []) l(signal);
    },
    subscribe(conversationId, listener) {
      let set = listeners.get(conversationId);
      if (!set) {
        set = new Set();
        listeners.set(conversationId, set);
      }
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(conversationId);
      };
    },
    async close() {
      listeners.clear();
    },
  };
}
